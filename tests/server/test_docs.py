"""The docs tell the truth: every shell block of the pages in PAGES runs, as written, against
a real gunicorn of the project, or is listed in EXEMPT with the reason it is not run; every
JSON block is JSON, and every key object shown has the fields of a real one, in their order;
any other block (a configuration) is, byte for byte, a file the suite uses.

How a page's shell blocks run: all of them, in the page's order, as one bash script, so that
a variable one block sets is there for the next, as in a reader's terminal. The script runs
with `set -euo pipefail`, and `curl` is a function that adds `--fail-with-body --silent
--show-error`: an answer of 400 or more fails the run, with its body. It runs in a folder of
its own, where `.venv` is the project's virtual environment and `instance/api-keys.sqlite3` a
small SQLite database (what the backup commands copy), with `KEY` the SDK Integration key
the server printed on its first start and `DATABASE_URL` that server's database (so that
`flask --app app ...` works on it). The one change made to the text: the base URL of
`make run`, http://127.0.0.1:5000, becomes the test server's. The pages run one after the
other on one server, as a reader's would: each changes only keys it makes itself (by their
$ID) or an organization of its own (acme), and none counts what the others leave.

Needs curl and jq (the walkthrough reads a new key out of its answer with jq); skipped,
saying so, without them.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from app.domain import keyformat
from tests.key_fields import KEY_FIELDS
from tests.processes import BIN, PROJECT, service_env
from tests.server.conftest import START_TIMEOUT, Server, serving
from tests.server.test_gunicorn import sdk_key
from tests.test_revoke import LEAKED

# The pages whose blocks this module holds to account.
PAGES = (
    "README.md",
    "docs/api.md",
    "docs/design.md",
    "docs/operations.md",
    "docs/security.md",
    "docs/contributing.md",
    "docs/page.md",
    "docs/metrics.md",
)
# The pages whose blocks the tests of what they show read instead, each in that test module.
ELSEWHERE = {
    "docs/gateways.md": "tests/server/test_gateway.py",
    "docs/mcp.md": "tests/server/test_mcp.py",
    "docs/extension.md": "tests/test_extension.py",
    "docs/webhooks.md": "tests/test_webhook_docs.py",
}
SHELL = {"sh", "bash", "console", "shell"}
PLAIN = {"", "text", "json"}  # shown, not run; JSON is checked to be JSON
BASE = "http://127.0.0.1:5000"  # make run's address, as the pages write it

# (page, first line of the block) -> why the test does not run it.
EXEMPT = {
    ("README.md", "make run     # serves the API on http://127.0.0.1:5000"): (
        "make run serves until stopped (the test's gunicorn is what it starts), and make test"
        " is the whole suite, this test included"
    ),
    ("README.md", "KEY=ak_...   # the SDK Integration key your first start printed"): (
        "the reader's own key: the test sets KEY to the one its server printed"
    ),
    ("docs/operations.md", "make run HOST=0.0.0.0 PORT=8080 WORKERS=4"): (
        "make run serves until stopped, and this one on every address of the machine"
    ),
    ("docs/operations.md", "export DATABASE_URL=postgresql://apikeys:secret@db.internal/apikeys"): (
        "a PostgreSQL server of the reader's, and a service that runs until stopped; every"
        " test of tests/server/ starts gunicorn so, after flask db upgrade, on TEST_DATABASE_URL"
    ),
    ("docs/operations.md", "# Every host: the same database and the same Redis."): (
        "hosts and nginx that serve until stopped, on servers of the reader's;"
        " tests/server/test_hosts.py runs examples/hosts/host.sh and nginx.conf so"
    ),
    ("docs/operations.md", "# One host at a time, each once its new workers are ready."): (
        "reloads hosts of the reader's; tests/server/test_hosts.py sends each host's master"
        " SIGHUP under load, by its pid file"
    ),
    (
        "docs/contributing.md",
        "apt-get install -y chromium chromium-driver nginx"
        " libnginx-mod-http-headers-more-filter caddy \\",
    ): "installs system packages, as root",
    ("docs/contributing.md", "TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \\"): (
        "runs the whole suite, this test included"
    ),
}
# page -> the files its configuration blocks are, byte for byte.
CONFIGURATION: dict[str, tuple[str, ...]] = {
    "docs/metrics.md": ("examples/prometheus.yml", "examples/prometheus-token.yml"),
    "docs/operations.md": ("examples/hosts/nginx.conf",),
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, from 1
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]


FENCE = re.compile(r"( *)```(\S*)\s*")


def blocks(page: str) -> list[Block]:
    """The fenced blocks of a page, in order, each unindented as far as its fence is."""
    found: list[Block] = []
    opened: tuple[int, str, str] | None = None  # line, indent, language
    body: list[str] = []
    for number, line in enumerate((PROJECT / page).read_text().split("\n"), 1):
        fence = FENCE.fullmatch(line)
        if opened is None and fence:
            opened, body = (number, fence[1], fence[2]), []
        elif opened is not None and fence and not fence[2]:
            found.append(Block(page, opened[0], opened[2], "\n".join(body)))
            opened = None
        elif opened is not None:
            body.append(line.removeprefix(opened[1]))
    assert opened is None, f"{page}: the block opened at line {opened[0]} is never closed"
    return found


def to_run(page: str) -> list[Block]:
    return [b for b in blocks(page) if b.language in SHELL and (page, b.first_line) not in EXEMPT]


def test_every_page_is_checked_here_or_where_it_says():
    pages = {f"docs/{page.name}" for page in (PROJECT / "docs").glob("*.md")}
    assert pages <= set(PAGES) | set(ELSEWHERE), pages - set(PAGES) - set(ELSEWHERE)
    for page, tests in ELSEWHERE.items():
        name = page.removeprefix("docs/")
        assert name in (PROJECT / tests).read_text(), f"{tests} does not read {page}"


def test_every_exemption_names_a_shell_block_of_its_page():
    shown = {(page, b.first_line) for page in PAGES for b in blocks(page) if b.language in SHELL}
    assert set(EXEMPT) <= shown, set(EXEMPT) - shown


def test_every_other_block_is_shown_json_or_a_file_the_suite_uses():
    for page in PAGES:
        for block in blocks(page):
            if block.language == "json":
                json.loads(block.text)  # a sample a reader can paste
            elif block.language not in SHELL | PLAIN:
                files = {path: (PROJECT / path).read_text() for path in CONFIGURATION.get(page, ())}
                assert block.text + "\n" in files.values(), (
                    f"{page}, line {block.line}: a {block.language} block that is no file of"
                    " the suite's (CONFIGURATION)"
                )


def key_objects(value) -> list[dict]:
    """Every object in a JSON value that is shaped as a key (it says whether it is immutable)."""
    if isinstance(value, list):
        return [found for item in value for found in key_objects(item)]
    if isinstance(value, dict):
        inner = [found for item in value.values() for found in key_objects(item)]
        return ([value] if "immutable" in value else []) + inner
    return []


def test_the_key_objects_shown_have_every_field_of_a_real_one(client, org, make_key):
    key = make_key(name="CI deploys", scopes=("monitor:read", "monitor:write"))
    identifier = keyformat.identifier_of(key)
    real = client.get(f"/api/keys/{identifier}", auth=(org.sdk, "")).get_json()
    assert tuple(real) == KEY_FIELDS
    readme = [
        found
        for block in blocks("README.md")
        if block.language == "json"
        for found in key_objects(json.loads(block.text))
    ]
    assert readme, "README.md shows no key object"
    for page in PAGES:
        for block in blocks(page):
            if block.language == "json":
                for shown in key_objects(json.loads(block.text)):
                    assert list(shown) == list(real), f"{page}, line {block.line}"


def test_the_leak_pattern_shown_is_the_one_the_tests_check():
    plain = [b.text for b in blocks("docs/security.md") if b.language in ("", "text")]
    assert LEAKED.pattern in plain


def test_the_first_start_prints_what_the_readme_shows(runner):
    printed = runner.invoke(args=["first-start"]).output
    shown = next(b.text for b in blocks("README.md") if "Created organization" in b.text)
    any_key = re.compile(r"ak_[A-Za-z0-9]+(\.\.\.)?")
    assert any_key.sub("ak_", shown) + "\n" == any_key.sub("ak_", printed)


def test_the_policy_shown_is_the_one_the_page_is_served_with(client):
    policy = client.get("/").headers["Content-Security-Policy"]
    assert policy in [b.text for b in blocks("docs/security.md") if b.language == "text"]


needs_tools = pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("jq") is None,
    reason="the docs' commands need curl and jq: apt-get install -y curl jq",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """The server every page's blocks run against."""
    with serving(tmp_path_factory, "docs", 2) as server:
        yield server


@needs_tools
@pytest.mark.parametrize("page", [page for page in PAGES if to_run(page)])
def test_the_shell_blocks_of_a_page_run_as_written(page, server, tmp_path):
    folder = tmp_path / "reader"
    (folder / "instance").mkdir(parents=True)
    (folder / ".venv").symlink_to(BIN.parent)
    with sqlite3.connect(folder / "instance" / "api-keys.sqlite3") as database:
        database.execute("CREATE TABLE kept (value TEXT)")
    database.close()
    lines = [
        "set -euo pipefail",
        'curl() { command curl --fail-with-body --silent --show-error "$@"; }',
    ]
    for block in to_run(page):
        lines.append(f"echo {shlex.quote(f'--- {page}, line {block.line}')} >&2")
        lines.append(block.text.replace(BASE, f"http://127.0.0.1:{server.port}"))
    # The reader's commands are the server's host: they count in its file.
    counts = server.env["RATELIMIT_STORAGE_URI"]
    env = service_env(
        DATABASE_URL=server.database, RATELIMIT_STORAGE_URI=counts, KEY=sdk_key(server)
    )
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        # A bound for a hang: a page's blocks run a dozen `flask` commands, each loading the
        # application, which takes seconds each on a loaded machine.
        timeout=3 * START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{done.stderr}\n{done.stdout}"
