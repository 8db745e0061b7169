"""The OpenAPI document as third-party tools meet it, served by a real gunicorn: the client
that openapi-python-client generates from /openapi.json, with no warning, drives list,
create, get, update, rotate, delete and refusals with typed models; and Redocly's
recommended rules pass (where npx is installed: .ci/run's machine has it)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.domain import keyformat
from tests.processes import BIN
from tests.server.conftest import Server, serving
from tests.server.test_gunicorn import sdk_key

PACKAGE = "api_keys_service_client"
# Redocly's CLI, at a version known to run on Node.js 20 (Debian's is 18 or 20).
REDOCLY = "@redocly/cli@2.77.0"


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    """The document as a client fetches it."""
    with serving(tmp_path_factory, "document", 1) as server:
        answer = server.request("GET", "/openapi.json")
    assert answer.status == 200
    path = tmp_path_factory.mktemp("document") / "openapi.json"
    path.write_bytes(answer.body)
    return path


def generate(document: Path, output: Path) -> str:
    """Run openapi-python-client's command line; what it printed."""
    env = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # its ruff
    command = [str(BIN / "openapi-python-client"), "generate", "--overwrite"]
    completed = subprocess.run(
        [*command, "--path", str(document), "--output-path", str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    printed = completed.stdout + completed.stderr
    assert completed.returncode == 0, printed
    return printed


@pytest.fixture(scope="module")
def client_package(served, tmp_path_factory):
    output = tmp_path_factory.mktemp("client") / "client"
    printed = generate(served, output)
    assert "warning" not in printed.lower(), printed
    sys.path.insert(0, str(output))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(output))
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def test_the_generated_client_drives_every_key_operation_with_typed_models(
    client_package, start_server
):
    from api_keys_service_client.api.keys import (
        create_key,
        delete_key,
        get_key,
        list_keys,
        rotate_key,
        update_key,
    )
    from api_keys_service_client.models import (
        CreateKey,
        CreateKeyKind,
        CreateKeyScopesItem,
        KeyOutput,
        KeyPage,
        Problem,
        RotateKey,
        UpdateKey,
        UpdateKeyScopesItem,
    )

    server: Server = start_server(workers=2)
    sdk = sdk_key(server)
    api = client_package.AuthenticatedClient(
        base_url=f"http://127.0.0.1:{server.port}", token=sdk, raise_on_unexpected_status=True
    )
    with api:
        page = list_keys.sync(client=api, page_size=10)
        assert isinstance(page, KeyPage)
        assert page.total_count == 2 and len(page.data) == 2

        body = CreateKey(
            name="generated", kind=CreateKeyKind.CUSTOM, scopes=[CreateKeyScopesItem.SITEREAD]
        )
        created = create_key.sync_detailed(client=api, body=body)
        assert created.status_code == 201
        made = created.parsed
        assert isinstance(made, KeyOutput) and keyformat.is_full_key(made.key)
        assert created.headers["Location"].endswith(keyformat.identifier_of(made.key))

        got = get_key.sync(made.key, client=api)
        assert isinstance(got, KeyOutput)
        assert (got.name, got.key) == ("generated", keyformat.shown(got.key[:-3]))

        change = UpdateKey(name="renamed", scopes=[UpdateKeyScopesItem.SITEWRITE])
        updated = update_key.sync(got.key, client=api, body=change)
        assert isinstance(updated, KeyOutput)
        assert (updated.name, [str(s) for s in updated.scopes]) == ("renamed", ["site:write"])

        rotated = rotate_key.sync(got.key, client=api, body=RotateKey(grace_seconds=60))
        assert isinstance(rotated, KeyOutput) and keyformat.is_full_key(rotated.key)
        assert rotated.name == "renamed" and rotated.expires_at is None

        deleted = delete_key.sync_detailed(rotated.key, client=api)
        assert deleted.status_code == 204

        # Refusals arrive parsed as the Problem model, code included.
        gone = get_key.sync(rotated.key, client=api)
        assert isinstance(gone, Problem)
        assert (gone.status, gone.code) == (404, "not_found")
        invalid = create_key.sync(
            client=api, body=CreateKey(name="no scopes", kind=CreateKeyKind.CUSTOM)
        )
        assert isinstance(invalid, Problem)
        assert (invalid.status, invalid.code) == (422, "validation_error")
        assert "scopes" in invalid.errors.to_dict()
    anonymous = client_package.Client(base_url=f"http://127.0.0.1:{server.port}")
    with anonymous:
        refused = list_keys.sync(client=anonymous)
    assert isinstance(refused, Problem)
    assert (refused.status, refused.code) == (401, "unauthorized")


@pytest.mark.skipif(
    shutil.which("npx") is None,
    reason="no npx (Node.js): apt-get install nodejs npm, for Redocly's lint",
)
def test_redoclys_recommended_rules_pass(served):
    command = [shutil.which("npx"), "--yes", REDOCLY, "lint", "--extends=recommended"]
    completed = subprocess.run(
        [*command, "--format=json", str(served)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    start = completed.stdout.find("{")
    assert start >= 0, completed.stdout + completed.stderr
    report = json.loads(completed.stdout[start:])
    problems = [(p["severity"], p["ruleId"], p["message"]) for p in report["problems"]]
    assert problems == [], problems
    assert completed.returncode == 0, completed.stderr
