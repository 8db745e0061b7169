"""The MCP server (docs/design.md, "MCP") under real gunicorn workers, driven by
the official `mcp` client: the handshake (every version the SDK serves) and server/discover
(the 2026-07-28 version the client's default mode negotiates), every tool and every
refusal, the authentication rules as the client meets them, 405 for GET and DELETE, a
deleted key refused by every worker at once, both workers serving, no key in any log, and
a worker that serves only REST paying nothing for the SDK; and by the MCP Inspector's CLI
(the TypeScript SDK's client, which checks every result against the tool's output schema):
docs/mcp.md's commands and host configuration as written, every tool and a refusal of each.

The tests share one server, each with an organization of its own; those that need a server
as it starts (workers that have not loaded the SDK, settings of their own, its whole log)
start their own."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import re
import shlex
import shutil
import string
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
)

from app.domain import keyformat
from app.domain.scopes import SCOPES
from tests.processes import PROJECT, run, service_env
from tests.server.conftest import REQUEST_TIMEOUT, Org, Server, serving
from tests.server.test_gunicorn import in_parallel, sdk_key
from tests.server.test_secrets_in_logs import secrets_of
from tests.test_mcp import TOOLS

WORKERS = 2
# mode= of the official client -> the protocol version it ends up speaking.
MODES = {"legacy": LATEST_HANDSHAKE_VERSION, "auto": LATEST_MODERN_VERSION}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """One server for the tests that leave each other alone: each has an organization of its
    own, and spends the rate limit of keys of its own. Usage is written five times a second:
    a use shows in a key's usage within a second."""
    env = {"USAGE_FLUSH_SECONDS": "0.2"}
    with serving(tmp_path_factory, "mcp", WORKERS, env) as server:
        yield server


@pytest.fixture
def org(server_org: Org) -> Org:
    """Each test's organization: one of its own on the module's server."""
    return server_org


@asynccontextmanager
async def connected(
    server, headers: dict[str, str], mode: str = "auto", seen: list | None = None
) -> AsyncIterator[Client]:
    """The official client on /mcp, sending `headers` with every request; the HTTP answers
    it gets are appended to `seen`."""

    async def remember(response: httpx2.Response) -> None:
        await response.aread()
        seen.append(response)

    hooks = {"response": [remember]} if seen is not None else {}
    async with httpx2.AsyncClient(
        headers=headers, timeout=REQUEST_TIMEOUT, event_hooks=hooks
    ) as http:
        transport = streamable_http_client(f"http://127.0.0.1:{server.port}/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def post(server, key: str | None, message: dict, version: str | None = None):
    """One JSON-RPC message on a new connection (any worker may answer): status, headers,
    body."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    headers |= bearer(key) if key else {}
    if version:
        headers["MCP-Protocol-Version"] = version
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_TIMEOUT)
    try:
        connection.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def refused(result: CallToolResult) -> dict:
    """A refusal's problem body: an error result with one text item holding it as JSON,
    and no structured content."""
    assert result.is_error, result
    assert result.structured_content is None, result
    [item] = result.content
    assert isinstance(item, TextContent)
    body = json.loads(item.text)
    assert isinstance(body["code"], str)
    return body


# The protocol: every version the SDK serves.


def test_every_handshake_version_is_negotiated(server, org):
    sdk = org.sdk
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}}
        params["clientInfo"]["version"] = "1"
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        status, _, body = post(server, sdk, initialize)
        assert status == 200, body
        assert json.loads(body)["result"]["protocolVersion"] == version
        status, _, body = post(server, sdk, TOOLS_LIST, version=version)
        assert status == 200, body
        assert [tool["name"] for tool in json.loads(body)["result"]["tools"]] == list(TOOLS)


async def every_tool(server, sdk: str, telemetry: str, mode: str) -> None:
    async with connected(server, bearer(sdk), mode) as client:
        assert client.session.protocol_version == MODES[mode]
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == list(TOOLS)

        arguments = {"name": f"agent ({mode})", "kind": "custom", "scopes": ["site:read"]}
        arguments["expires_at"] = "2999-01-01T00:00:00Z"
        created = await client.call_tool("create_key", arguments)
        assert not created.is_error
        full_key = created.structured_content["key"]
        assert keyformat.is_full_key(full_key)
        shown = keyformat.shown(keyformat.identifier_of(full_key))
        rest = server.request("GET", f"/api/keys/{shown}", full_key)  # the new key works
        assert rest.status == 200

        got = await client.call_tool("get_key", {"key": shown})
        assert got.structured_content == rest.json()
        page = await client.call_tool("list_keys", {"page_size": 200, "kind": "custom"})
        listed = server.request("GET", "/api/keys?page_size=200&kind=custom", sdk).json()
        assert page.structured_content == listed
        updated = await client.call_tool("update_key", {"key": shown, "name": "renamed"})
        assert updated.structured_content["name"] == "renamed"
        assert server.request("GET", f"/api/keys/{shown}", sdk).json()["name"] == "renamed"
        expired = await client.call_tool("list_keys", {"state": "expired"})
        assert expired.structured_content["total_count"] == 0

        rotated = await client.call_tool("rotate_key", {"key": shown, "grace_seconds": 0})
        assert not rotated.is_error
        assert server.request("GET", "/api/keys", full_key).status == 401  # gone at once
        full_key = rotated.structured_content["key"]
        assert rotated.structured_content["name"] == "renamed"
        assert server.request("GET", "/api/keys", full_key).status == 200
        shown = keyformat.shown(keyformat.identifier_of(full_key))
        window = {"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}  # settled
        usage = await client.call_tool("get_key_usage", {"key": shown, **window})
        query = "since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00Z"
        rest = server.request("GET", f"/api/keys/{shown}/usage?{query}", sdk).json()
        # The totals first; of the buckets, only those with uses (none in this window).
        assert usage.structured_content == {"total": rest.pop("total"), **rest, "buckets": []}

        # Refusals: isError, with the REST twin's problem body, code included, as one text
        # item; no structured content, which a client checks against the output schema.
        refusals = {
            "not_found": ("get_key", {"key": "ak_unknown"}, "GET", "/api/keys/ak_unknown", None),
            "immutable_key": (
                "update_key",
                {"key": telemetry, "scopes": list(SCOPES)},
                "PUT",
                f"/api/keys/{telemetry}",
                {"scopes": list(SCOPES)},
            ),
            "validation_error": (
                "create_key",
                {"name": "", "kind": "custom", "scopes": ["nope"]},
                "POST",
                "/api/keys",
                {"name": "", "kind": "custom", "scopes": ["nope"]},
            ),
        }
        refusals["validation_error (rotate)"] = (
            "rotate_key",
            {"key": shown, "grace_seconds": -1},
            "POST",
            f"/api/keys/{shown}/rotate",
            {"grace_seconds": -1},
        )
        for case, (tool, arguments, method, path, body) in refusals.items():
            code = case.partition(" ")[0]
            refusal = refused(await client.call_tool(tool, arguments))
            assert refusal["code"] == code, tool
            assert refusal == server.request(method, path, sdk, body).json()
        listing = await client.call_tool("list_keys", {"page_size": 0})
        assert refused(listing)["code"] == "validation_error"

        deleted = await client.call_tool("delete_key", {"key": shown})
        assert not deleted.is_error
        assert deleted.structured_content is None  # as the API's 204 has no body
        assert server.request("GET", "/api/keys", full_key).status == 401
        again = await client.call_tool("delete_key", {"key": shown})
        assert refused(again)["code"] == "not_found"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_tool_and_refusal_with_the_official_client(server, org, mode, monkeypatch):
    # The client's probe of server/discover falls back to the handshake after 10 s: on a
    # loaded machine a worker's first /mcp (which loads the SDK) can take longer.
    monkeypatch.setattr("mcp.client.session.DISCOVER_TIMEOUT_SECONDS", REQUEST_TIMEOUT)
    sdk, telemetry = org.sdk, org.telemetry
    asyncio.run(every_tool(server, sdk, telemetry, mode))


# Authentication, as the official client meets it.


async def refused_connection(server, headers: dict[str, str]) -> httpx2.Response:
    """The first answer the client got, trying to connect with `headers`."""
    seen: list[httpx2.Response] = []
    with pytest.raises((MCPError, ExceptionGroup)):
        async with connected(server, headers, seen=seen) as client:
            await client.list_tools()
    return seen[0]


def test_the_authentication_rules_as_the_official_client_meets_them(server, org):
    sdk, telemetry = org.sdk, org.telemetry
    custom = server.request(
        "POST", "/api/keys", sdk, {"name": "all", "kind": "custom", "scopes": list(SCOPES)}
    ).json()["key"]
    unauthorized = {
        "no key": {},
        "an unknown key": bearer(keyformat.new_key("ak_")[1]),
        "a malformed key": bearer(sdk[:-1]),
        "the sdk key as Basic credentials": {
            "Authorization": "Basic " + base64.b64encode(f"{sdk}:".encode()).decode()
        },
    }
    presented = {"an unknown key", "a malformed key"}  # a Bearer token, refused
    for case, headers in unauthorized.items():
        answer = asyncio.run(refused_connection(server, headers))
        assert answer.status_code == 401, case
        assert answer.headers["Content-Type"] == "application/problem+json", case
        assert answer.json()["code"] == "unauthorized", case
        # The challenge, as the SDK's own parser reads it: RFC 6750's invalid_token and the
        # 401's detail for a Bearer token presented; the realm alone for none.
        assert extract_field_from_www_auth(answer, "realm") == "mcp", case
        error = extract_field_from_www_auth(answer, "error")
        description = extract_field_from_www_auth(answer, "error_description")
        if case in presented:
            assert (error, description) == ("invalid_token", answer.json()["detail"]), case
        else:
            assert answer.headers["WWW-Authenticate"] == 'Bearer realm="mcp"', case
    for case, key in {"telemetry": telemetry, "custom, every scope": custom}.items():
        answer = asyncio.run(refused_connection(server, bearer(key)))
        assert answer.status_code == 403, case
        assert answer.headers["Content-Type"] == "application/problem+json", case
        assert answer.json()["code"] == "forbidden", case


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_405_before_the_sdk(server, method):
    answer = server.request(method, "/mcp")
    assert answer.status == 405
    assert answer.headers["Allow"] == "POST"
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.json()["code"] == "method_not_allowed"


# Several workers.


def test_a_deleted_key_fails_on_its_next_call_on_every_worker(server, org):
    sdk = org.sdk

    async def create() -> str:
        async with connected(server, bearer(sdk)) as client:
            made = await client.call_tool("create_key", {"name": "d", "kind": "sdk_integration"})
            return made.structured_content["key"]

    doomed = asyncio.run(create())
    warm = in_parallel(4 * WORKERS, lambda: post(server, doomed, TOOLS_LIST))
    assert [status for status, _, _ in warm] == [200] * (4 * WORKERS)

    async def delete() -> None:
        async with connected(server, bearer(sdk)) as client:
            deleted = await client.call_tool("delete_key", {"key": doomed})
            assert not deleted.is_error

    asyncio.run(delete())
    after = in_parallel(4 * WORKERS, lambda: post(server, doomed, TOOLS_LIST))
    assert [status for status, _, _ in after] == [401] * (4 * WORKERS)
    refused_token = (
        'Bearer realm="mcp", error="invalid_token", '
        'error_description="No such API key: it may have been deleted, revoked or rotated."'
    )
    assert all(headers["WWW-Authenticate"] == refused_token for _, headers, _ in after)


def runs_the_sdk(pid: int) -> bool:
    """Whether the worker has loaded the SDK: pydantic-core's native library, which only
    the SDK brings, is mapped in its memory."""
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


def test_each_worker_serves_mcp_and_only_then_loads_the_sdk(start_server):
    server = start_server(workers=WORKERS)  # its workers have served nothing yet
    sdk = sdk_key(server)
    workers = server.worker_pids()
    assert len(workers) == WORKERS
    assert not any(runs_the_sdk(pid) for pid in workers)  # only REST so far
    for _ in range(20):  # until every worker has served /mcp
        answers = in_parallel(4 * WORKERS, lambda: post(server, sdk, TOOLS_LIST))
        assert {status for status, _, _ in answers} == {200}
        if all(runs_the_sdk(pid) for pid in workers):
            break
    assert all(runs_the_sdk(pid) for pid in workers)


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def test_a_worker_that_serves_only_rest_pays_nothing_for_mcp(start_server):
    """Peak RSS of a worker after the same REST requests, /mcp mounted and not: within 5%."""
    peaks = {}
    for enabled in ("true", "false"):
        server = start_server(workers=1, env={"MCP_ENABLED": enabled})
        sdk = sdk_key(server)
        for _ in range(50):
            assert server.request("GET", "/api/keys", sdk).status == 200
        assert server.request("GET", "/mcp", sdk).status == (405 if enabled == "true" else 404)
        [worker] = server.worker_pids()
        peaks[enabled] = peak_rss_kib(worker)
        server.stop()
    assert peaks["true"] <= peaks["false"] * 1.05, peaks


# Logs.


def test_no_secret_of_a_key_in_any_log_of_mcp_traffic(start_server):
    server = start_server(workers=1, env={"GUNICORN_CMD_ARGS": "--log-level debug"})
    sdk = sdk_key(server)
    unknown = keyformat.new_key("ak_")[1]

    async def traffic() -> list[str]:
        async with connected(server, bearer(sdk)) as client:
            made = await client.call_tool(
                "create_key", {"name": "logged", "kind": "custom", "scopes": ["site:read"]}
            )
            key = made.structured_content["key"]
            await client.call_tool("get_key", {"key": key})
            await client.call_tool("update_key", {"key": key, "name": key})
            await client.call_tool("get_key", {"key": unknown})
            await client.call_tool("create_key", {"name": key, "kind": "custom", "scopes": [key]})
            await client.call_tool("delete_key", {"key": key})
        return [key]

    made = asyncio.run(traffic())
    for key in [*made, unknown]:
        post(server, key, TOOLS_LIST)
    server.stop()
    logs = "\n".join(line for line in server.output().splitlines() if "): ak_" not in line)
    assert "[DEBUG]" in logs
    assert "POST /mcp" in logs
    for value in [sdk, unknown, *made]:
        for secret in secrets_of(value):
            assert secret not in logs, secret[:8]


# The MCP Inspector's CLI: the TypeScript SDK's client, which refuses a result whose
# structured content does not match the tool's output schema, a refusal's included.

INSPECTOR_DIR = Path(__file__).parent / "mcp_inspector"  # its pinned package.json
INSPECTOR = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
DOC = PROJECT / "docs" / "mcp.md"
PACKAGE = "@modelcontextprotocol/inspector"
# The commands the suite writes (not the docs' own, run as written) wait for the connection
# as long as for any request: the Inspector's 15 s failed on a loaded machine.
CONNECT_TIMEOUT = ["--connect-timeout", str(int(REQUEST_TIMEOUT * 1000))]
needs_inspector = pytest.mark.skipif(
    shutil.which("node") is None or not INSPECTOR.exists(),
    reason="no MCP Inspector: make test installs it where npm is",
)


def fenced(language: str, holding: str) -> str:
    """The one block of docs/mcp.md in `language` that holds `holding`."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", DOC.read_text(), re.MULTILINE | re.DOTALL)
    [block] = [block for block in blocks if holding in block]
    return block


def doc_commands() -> list[str]:
    """The Inspector commands docs/mcp.md shows, each on one line."""
    lines = fenced("sh", f"npx {PACKAGE}").replace("\\\n", "").splitlines()
    return [line for line in lines if line.startswith("npx ")]


def inspector_env(tmp_path: Path, server, key: str) -> dict[str, str]:
    """The environment of docs/mcp.md's commands: MCP_URL and API_KEY; a home of the test's
    own, where the Inspector and npm write what they keep."""
    return service_env(
        MCP_URL=f"http://127.0.0.1:{server.port}/mcp",
        API_KEY=key,
        HOME=str(tmp_path),
        MCP_INSPECTOR_SECRET_STORE="memory",  # no OS keychain here, nothing to keep
        npm_config_update_notifier="false",
    )


def printed(completed: subprocess.CompletedProcess) -> dict:
    """The result an Inspector run printed, as JSON. Its exit status says which: 0 a result,
    5 one with isError; any other (1 for a result that does not match the tool's output
    schema) comes with no result."""
    assert completed.returncode in (0, 5), completed.stderr
    result = json.loads(completed.stdout)
    assert completed.returncode == (5 if result.get("isError") else 0), completed.stderr
    return result


def inspector_call(env: dict[str, str], tool: str, **arguments) -> subprocess.CompletedProcess:
    """One tools/call through the Inspector's CLI, connected with the very flags of
    docs/mcp.md's first command; the arguments as `--tool-arg` pairs (JSON unless a
    string)."""
    connection = shlex.split(doc_commands()[0])
    connection = connection[2 : connection.index("--method")]  # after `npx <package>`
    pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
    command = [str(INSPECTOR), *(string.Template(part).substitute(env) for part in connection)]
    command += [*CONNECT_TIMEOUT, "--method", "tools/call", "--tool-name", tool]
    command += ["--tool-arg", *pairs]
    return run(command, env, check=False)


def inspect(env: dict[str, str], tool: str, **arguments) -> CallToolResult:
    """A tools/call's result through the Inspector's CLI (inspector_call)."""
    return CallToolResult.model_validate(printed(inspector_call(env, tool, **arguments)))


def inspector_error(completed: subprocess.CompletedProcess) -> dict:
    """The error an Inspector run printed instead of a result: the last line of its standard
    error, as JSON."""
    assert completed.returncode not in (0, 5), completed.stdout
    return json.loads(completed.stderr.splitlines()[-1])["error"]


def run_as_written(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """One of docs/mcp.md's commands, run by the shell as written, from where npx finds
    the pinned Inspector without the network."""
    in_place = f"cd {shlex.quote(str(INSPECTOR_DIR))} && {command}"
    return run(["bash", "-c", in_place], env, check=False)


def as_written(command: str, env: dict[str, str]) -> dict:
    """The result one of docs/mcp.md's commands prints."""
    return printed(run_as_written(command, env))


@needs_inspector
def test_the_docs_inspector_commands_and_host_configuration_work_as_written(server, org, tmp_path):
    sdk = org.sdk
    env = inspector_env(tmp_path, server, sdk)
    pinned = json.loads((INSPECTOR_DIR / "package.json").read_text())["dependencies"][PACKAGE]
    listing, call = doc_commands()
    assert listing.startswith(f"npx {PACKAGE}@{pinned} ")  # the version the suite runs
    # Every worker loads the SDK first: the docs' commands run as written, with the
    # Inspector's 15 s to connect, which a worker's first /mcp can take on a loaded machine.
    warm = in_parallel(4 * WORKERS, lambda: post(server, sdk, TOOLS_LIST))
    assert {status for status, _, _ in warm} == {200}
    assert [tool["name"] for tool in as_written(listing, env)["tools"]] == list(TOOLS)
    page = as_written(call, env)["structuredContent"]
    assert page == server.request("GET", "/api/keys?page_size=5&kind=custom", sdk).json()

    # The host configuration: valid JSON, read by the Inspector as hosts read it.
    block = fenced("json", '"mcpServers"')
    [(name, entry)] = json.loads(block)["mcpServers"].items()
    assert (entry["type"], sorted(entry)) == ("http", ["headers", "type", "url"])
    placeholder = entry["headers"]["Authorization"].removeprefix("Bearer ")
    config = tmp_path / "mcp.json"
    config.write_text(block.replace(entry["url"], env["MCP_URL"]).replace(placeholder, sdk))
    command = [str(INSPECTOR), "--cli", "--config", str(config), "--server", name]
    command += [*CONNECT_TIMEOUT, "--method", "tools/call", "--tool-name", "get_key"]
    command += ["--tool-arg", "key=ak_unknown"]
    # ... and the refusal docs/mcp.md shows is the one the service answers.
    shown = json.loads(fenced("json", '"isError": true'))
    assert printed(run(command, env, check=False)) == shown


@needs_inspector
def test_every_tool_and_a_refusal_of_each_with_the_inspector(server, org, tmp_path):
    sdk, telemetry = org.sdk, org.telemetry
    env = inspector_env(tmp_path, server, sdk)

    arguments = {"name": "inspected", "kind": "custom", "scopes": ["site:read"]}
    created = inspect(env, "create_key", **arguments, expires_at="2999-01-01T00:00:00Z")
    full_key = created.structured_content["key"]
    assert keyformat.is_full_key(full_key)
    shown = keyformat.shown(keyformat.identifier_of(full_key))
    got = inspect(env, "get_key", key=shown).structured_content
    assert got == server.request("GET", f"/api/keys/{shown}", sdk).json()
    page = inspect(env, "list_keys", page_size=200, kind="custom").structured_content
    assert page == server.request("GET", "/api/keys?page_size=200&kind=custom", sdk).json()
    updated = inspect(env, "update_key", key=shown, name="renamed").structured_content
    assert updated == server.request("GET", f"/api/keys/{shown}", sdk).json()
    rotated = inspect(env, "rotate_key", key=shown, grace_seconds=0).structured_content
    assert server.request("GET", "/api/keys", full_key).status == 401  # gone at once
    assert server.request("GET", "/api/keys", rotated["key"]).status == 200
    gone = keyformat.shown(keyformat.identifier_of(rotated["key"]))
    deleted = inspect(env, "delete_key", key=gone)
    assert (deleted.is_error, deleted.structured_content) == (False, None)
    assert server.request("GET", "/api/keys", rotated["key"]).status == 401

    # (tool, arguments, REST method, path, body): the same request both ways.
    refusals = [
        ("list_keys", {"page_size": 0}, "GET", "/api/keys?page_size=0", None),
        ("get_key", {"key": "ak_unknown"}, "GET", "/api/keys/ak_unknown", None),
        (
            "create_key",
            {"name": "x", "kind": "root"},
            "POST",
            "/api/keys",
            {"name": "x", "kind": "root"},
        ),
        (
            "update_key",
            {"key": telemetry, "scopes": ["site:read"]},
            "PUT",
            f"/api/keys/{telemetry}",
            {"scopes": ["site:read"]},
        ),
        (
            "rotate_key",
            {"key": telemetry, "grace_seconds": -1},
            "POST",
            f"/api/keys/{telemetry}/rotate",
            {"grace_seconds": -1},
        ),
        ("delete_key", {"key": gone}, "DELETE", f"/api/keys/{gone}", None),  # deleted above
    ]
    for tool, arguments, method, path, body in refusals:
        answer = server.request(method, path, sdk, body)
        assert answer.status >= 400, tool
        assert refused(inspect(env, tool, **arguments)) == answer.json(), tool


# Uses are tool calls (docs/design.md, "Promises kept by default"): what a host sends around them
# (its handshake, tools/list, the Inspector's GET) spends nothing of a key's own limit, counted
# once for both workers (host://), whichever answers.

LIMIT = {"requests": 3, "seconds": 60}
THREE_AND_ONE_REFUSED = {"allowed": 3, "refused": {"rate_limited": 1}}


def limited_key(server, sdk: str, name: str) -> str:
    body = {"name": name, "kind": "sdk_integration", "rate_limit": LIMIT}
    made = server.request("POST", "/api/keys", sdk, body)
    assert made.status == 201, made.body
    return made.json()["key"]


def usage_total(server, sdk: str, key: str, expected: dict) -> dict:
    """The key's usage total once its worker has written `expected`, or after 10 seconds
    whatever it is."""
    path = f"/api/keys/{keyformat.shown(keyformat.identifier_of(key))}/usage"
    deadline = time.monotonic() + 10
    while True:
        total = server.request("GET", path, sdk).json()["total"]
        if total == expected or time.monotonic() > deadline:
            return total
        time.sleep(0.1)


async def past_the_limit(server, key: str, mode: str, seen: list[httpx2.Response]) -> None:
    """A host's session: connect, list the tools, call one until the key's limit refuses
    it, list them again."""
    async with connected(server, bearer(key), mode, seen) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == list(TOOLS)
        for _ in range(LIMIT["requests"]):
            assert not (await client.call_tool("get_key", {"key": key})).is_error
        with pytest.raises(MCPError):
            await client.call_tool("get_key", {"key": key})
        await client.list_tools()  # the protocol's other messages still pass


def test_a_host_makes_as_many_tool_calls_as_the_keys_limit_with_the_official_client(server, org):
    sdk = org.sdk
    for mode in sorted(MODES):
        key = limited_key(server, sdk, mode)
        seen: list[httpx2.Response] = []
        asyncio.run(past_the_limit(server, key, mode, seen))
        [refusal] = [answer for answer in seen if answer.status_code == 429]
        assert refusal.json()["code"] == "rate_limited", mode
        assert int(refusal.headers["Retry-After"]) > 0
        assert seen[-1].status_code == 200
        assert usage_total(server, sdk, key, THREE_AND_ONE_REFUSED) == THREE_AND_ONE_REFUSED


@needs_inspector
def test_a_host_makes_as_many_tool_calls_as_the_keys_limit_with_the_inspector(
    server, org, tmp_path
):
    """Each Inspector run connects afresh (initialize, its notification, a GET, tools/list)
    before its one tool call."""
    sdk = org.sdk
    key = limited_key(server, sdk, "inspected")
    env = inspector_env(tmp_path, server, key)
    shown = keyformat.shown(keyformat.identifier_of(key))
    for _ in range(LIMIT["requests"]):
        assert inspect(env, "get_key", key=shown).structured_content["name"] == "inspected"
    completed = inspector_call(env, "get_key", key=shown)
    assert completed.returncode == 1, completed.stderr  # as docs/mcp.md says
    error = inspector_error(completed)
    assert error["status"] == 429
    assert error["message"].startswith("Rate limited by the server (HTTP 429) on tools/call.")
    assert '"code":"rate_limited"' in error["message"]
    assert usage_total(server, sdk, key, THREE_AND_ONE_REFUSED) == THREE_AND_ONE_REFUSED


# A wrong key (issue 36): what the Inspector shows.

STORED_AUTH_ONLY = " --stored-auth-only"


@needs_inspector
def test_a_wrong_key_shows_the_services_reason_in_the_inspector(server, org, tmp_path):
    """docs/mcp.md's command as written, with a wrong key and a disabled one: the Inspector
    prints the service's 401, whose detail says why. Without --stored-auth-only, which the
    docs' commands carry, it starts OAuth on any 401, whatever the challenge says, and
    without a terminal stops there (docs/mcp.md)."""
    sdk = org.sdk
    body = {"name": "off", "kind": "sdk_integration", "enabled": False}
    disabled = server.request("POST", "/api/keys", sdk, body).json()["key"]
    wrong = keyformat.new_key("ak_")[1]
    listing, _ = doc_commands()
    assert STORED_AUTH_ONLY in listing
    details = {
        wrong: "No such API key: it may have been deleted, revoked or rotated.",
        disabled: "This API key is disabled: it authenticates nothing until enabled.",
    }
    for key, detail in details.items():
        env = inspector_env(tmp_path, server, key)
        completed = run_as_written(listing, env)
        assert completed.returncode == 3, completed.stderr
        error = inspector_error(completed)
        assert error["code"] == "auth_required"
        problem = json.loads(error["message"].removeprefix("Error POSTing to endpoint: "))
        assert (problem["status"], problem["detail"]) == (401, detail)
        if key == wrong:  # what docs/mcp.md shows, as the Inspector prints it
            assert {"error": error} == json.loads(fenced("json", '"auth_required"'))
    interactive = run_as_written(listing.replace(STORED_AUTH_ONLY, ""), env)
    assert inspector_error(interactive)["message"].startswith("Interactive OAuth requires a TTY")
