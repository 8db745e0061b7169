"""The MCP server at /mcp (docs/design.md, "MCP"), through Flask's test client: what comes
before the protocol (routing, authentication, limits, last_used, the body), and the tools,
whose every answer must be the REST twin's body, refusals included (as JSON text, with no
structured content), and whose schemas must be the OpenAPI document's. tests/server/test_mcp.py
drives it with the official clients through a real gunicorn."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import pytest
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sqlalchemy.exc import OperationalError

from app.access.auth import NO_SUCH_KEY, NOT_A_WHOLE_KEY, SHOWN_FORM
from app.domain import keyformat
from app.domain.scopes import KINDS, SCOPES
from app.http.challenges import Challenge
from app.http.messages import WORDS
from app.keys import service
from app.keys.schemas import MAX_GRACE_SECONDS, NAME_MAX_LENGTH, UPDATABLE
from app.mcp import server as mcp_server
from app.openapi import document as openapi
from app.usage import counter as usage_counter
from tests.processes import PROJECT, run

ACCEPT = "application/json, text/event-stream"
PAST = "2000-01-01T00:00:00Z"
PAST_NAIVE = datetime(2000, 1, 1)
TOOLS = (
    "list_keys",
    "get_key",
    "create_key",
    "update_key",
    "rotate_key",
    "get_key_usage",
    "list_identities",
    "delete_key",
    "get_identity",
    "create_identity",
    "update_identity",
    "delete_identity",
    "get_identity_usage",
)
TOOLS_THREAD = "AnyIO worker thread"


@pytest.fixture(autouse=True)
def closed_mcp(app):
    """Each test's MCP server is closed after it: its threads end, and the database
    connection of its tools' thread with them."""
    yield
    runtime = app.extensions.pop("mcp", None)
    if runtime is not None:
        runtime.close()


def in_seconds(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def rpc(client, key: str | None, method: str, params: dict | None = None, version=None):
    """One JSON-RPC request (stateless: no handshake needed); the HTTP response."""
    headers = {"Accept": ACCEPT} | (bearer(key) if key else {})
    if version:
        headers["MCP-Protocol-Version"] = version
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return client.post("/mcp", json=message, headers=headers)


def call(client, key: str, tool: str, arguments: dict) -> dict:
    """tools/call's result."""
    response = rpc(client, key, "tools/call", {"name": tool, "arguments": arguments})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.json["result"]


def refused(result: dict) -> dict:
    """A refusal's problem body: an error result whose one text item holds it as JSON, and
    no structured content (which clients check against the tool's output schema)."""
    assert result["isError"] is True, result
    assert "structuredContent" not in result, result
    [item] = result["content"]
    assert item["type"] == "text"
    body = json.loads(item["text"])
    assert isinstance(body["code"], str)
    return body


def listed(client, key: str) -> dict[str, dict]:
    response = rpc(client, key, "tools/list")
    assert response.status_code == 200, response.get_data(as_text=True)
    return {tool["name"]: tool for tool in response.json["result"]["tools"]}


# Routing: before the SDK, in the problem shape.


@pytest.mark.parametrize("method", ["GET", "DELETE", "HEAD", "PUT", "OPTIONS"])
def test_every_method_but_post_is_405_in_the_problem_shape(client, org, method):
    response = client.open("/mcp", method=method, headers=bearer(org.sdk) | {"Accept": ACCEPT})
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.mimetype == "application/problem+json"
    if method != "HEAD":
        assert response.json["code"] == "method_not_allowed"


def test_mcp_disabled_is_an_unknown_path_and_out_of_the_document(make_app, database_url, org):
    app = make_app(SQLALCHEMY_DATABASE_URI=database_url, MCP_ENABLED=False)
    response = rpc(app.test_client(), org.sdk, "tools/list")
    assert response.status_code == 404
    assert response.json["code"] == "not_found"
    assert "/mcp" not in openapi.document(app)["paths"]


# Authentication (section 13): a Bearer sdk_integration key, nothing else.


NEEDED = "A valid API key is required, as a Bearer token."


def invalid_token(detail: str) -> str:
    """The challenge of a 401 for a Bearer token the request presented (RFC 6750 section
    3.1): its error code and the 401's detail, which hosts show."""
    return f'Bearer realm="mcp", error="invalid_token", error_description="{detail}"'


def assert_unauthorized(response, said: str | None = None) -> None:
    """401 `unauthorized`: for a Bearer token presented, `said` (why it is no key) as its
    detail and in its challenge, with invalid_token; for none (`said` None), that a key is
    needed, and nothing more than the realm in the challenge (RFC 6750 section 3.1: no
    error code then)."""
    assert response.status_code == 401, response.get_data(as_text=True)
    challenge = invalid_token(said) if said else 'Bearer realm="mcp"'
    assert response.headers.get_all("WWW-Authenticate") == [challenge]
    assert response.mimetype == "application/problem+json"
    assert response.json["code"] == "unauthorized"
    assert response.json["detail"] == (said or NEEDED)


def test_no_key_is_401_with_a_bearer_challenge(client, org):
    assert_unauthorized(rpc(client, None, "tools/list"))


def test_an_sdk_key_as_basic_credentials_is_401(client, org):
    response = client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": ACCEPT},
        auth=(org.sdk, ""),
    )
    assert_unauthorized(response)  # no Bearer token


@pytest.mark.parametrize(
    "presented, said",
    [
        (keyformat.new_key("ak_")[1], NO_SUCH_KEY),  # well formed, unknown
        ("ak_shortandwrong", NOT_A_WHOLE_KEY),
        ("ak_Au1ZwTfQz9Xk...", SHOWN_FORM),
        ("", None),
    ],
    ids=["unknown", "malformed", "shown", "empty"],  # the same in every process of a run
)
def test_an_unknown_or_malformed_bearer_key_is_401_saying_which(client, org, presented, said):
    response = client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": ACCEPT, "Authorization": f"Bearer {presented}"},
    )
    assert_unauthorized(response, said)


def test_a_deleted_key_is_401_on_its_next_call(client, org, make_key):
    doomed = make_key("sdk_integration")
    assert rpc(client, doomed, "tools/list").status_code == 200
    deleted = client.delete(f"/api/keys/{doomed}", auth=(org.sdk, ""))
    assert deleted.status_code == 204
    assert_unauthorized(rpc(client, doomed, "tools/list"), NO_SUCH_KEY)


def test_the_challenge_reads_as_the_python_sdk_reads_it(client, org, make_key, sql):
    """The `mcp` SDK's own parser of WWW-Authenticate finds the error code and the 401's
    detail in it, an expired key's included."""
    expired = make_key("sdk_integration")
    sql(
        "UPDATE api_keys SET expires_at = :past WHERE identifier = :key",
        past=PAST_NAIVE,
        key=keyformat.identifier_of(expired),
    )
    for key, code in (("ak_wrong", "unauthorized"), (expired, "expired_key")):
        response = rpc(client, key, "tools/list")
        assert response.json["code"] == code
        assert extract_field_from_www_auth(response, "error") == "invalid_token"
        description = extract_field_from_www_auth(response, "error_description")
        assert description == response.json["detail"]
        assert extract_field_from_www_auth(response, "realm") == "mcp"
    bare = rpc(client, None, "tools/list")
    assert extract_field_from_www_auth(bare, "error") is None


def test_an_error_description_holds_only_what_rfc_6750_allows():
    header = Challenge("Bearer", "mcp").header('It said "no" \\ to caf\u00e9\n')
    described = 'Bearer realm="mcp", error="invalid_token", error_description="It said no  to caf"'
    assert header == ("WWW-Authenticate", described)
    assert Challenge("Basic", "api").header("refused") == ("WWW-Authenticate", 'Basic realm="api"')


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ],
)
def test_no_authorization_server_is_advertised(client, path):
    """The service takes API keys, not OAuth tokens: no protected-resource metadata (MCP's
    authorization specification: with none found, a client aborts its discovery)."""
    response = client.get(path)
    assert response.status_code == 404
    assert response.json["code"] == "not_found"


@pytest.mark.parametrize(
    "kind, scopes", [("telemetry", ()), ("custom", ("monitor:read",)), ("custom", SCOPES)]
)
def test_a_key_of_another_kind_is_403_whatever_its_scopes(client, make_key, kind, scopes):
    response = rpc(client, make_key(kind, scopes), "tools/list")
    assert response.status_code == 403
    assert response.mimetype == "application/problem+json"
    assert response.json["code"] == "forbidden"
    assert "WWW-Authenticate" not in response.headers


def test_last_used_is_recorded_by_an_mcp_request_a_refused_one_included(client, org, make_key):
    custom = make_key("custom", name="refused")
    assert rpc(client, custom, "tools/list").status_code == 403
    assert rpc(client, org.sdk, "tools/list").status_code == 200
    page = client.get("/api/keys", auth=(org.sdk, "")).json["data"]
    used = {key["name"]: key["last_used"] for key in page}
    assert used["SDK Integration"] is not None
    assert used["refused"] is not None
    assert used["Telemetry"] is None


@pytest.mark.parametrize(
    "app_config", [{"RATELIMIT_AUTH_FAILURES": "2/minute", "RATELIMIT_PER_KEY": "3/minute"}]
)
def test_the_abuse_limits_count_mcp_requests(client, org, make_key):
    sdk = make_key("sdk_integration")
    assert [rpc(client, sdk, "tools/list").status_code for _ in range(4)] == [200, 200, 200, 429]
    for _ in range(2):
        assert_unauthorized(rpc(client, "ak_wrong", "tools/list"), NOT_A_WHOLE_KEY)
    refused = rpc(client, org.sdk, "tools/list")  # this address has failed too often
    assert refused.status_code == 429
    assert refused.json["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1


def test_answers_are_not_stored(client, org):
    for response in (rpc(client, org.sdk, "tools/list"), rpc(client, None, "tools/list")):
        assert response.headers.getlist("Cache-Control") == ["no-store"]


# The body, read as every JSON body is (docs/design.md, "Requests and errors"), before the SDK.


def test_a_body_not_sent_as_json_is_415(client, org):
    response = client.post(
        "/mcp", data="{}", content_type="text/plain", headers=bearer(org.sdk) | {"Accept": ACCEPT}
    )
    assert response.status_code == 415
    assert response.json["code"] == "unsupported_media_type"


@pytest.mark.parametrize("body", ['{"jsonrpc": "2.0", "id": 1', "[]", '{"id": 1, "id": 2}'])
def test_a_body_that_is_not_one_json_object_is_400(client, org, body):
    response = client.post(
        "/mcp",
        data=body,
        content_type="application/json",
        headers=bearer(org.sdk) | {"Accept": ACCEPT},
    )
    assert response.status_code == 400
    assert response.json["code"] == "bad_request"


def test_a_body_over_64_kib_is_413(client, org):
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "x" * 70_000}}
    response = client.post("/mcp", json=big, headers=bearer(org.sdk) | {"Accept": ACCEPT})
    assert response.status_code == 413
    assert response.json["code"] == "payload_too_large"


# The protocol: the SDK's, for every version it serves.


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
def test_every_handshake_version_is_served(client, org, version):
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    response = rpc(client, org.sdk, "initialize", params)
    assert response.status_code == 200
    result = response.json["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "api-keys-service"
    assert "tools" in result["capabilities"]
    assert result["instructions"] == mcp_server.INSTRUCTIONS
    found = call_at(client, org.sdk, version, "get_key", {"key": org.sdk})
    assert found["structuredContent"]["kind"] == "sdk_integration"


def test_the_instructions_say_which_answers_carry_a_full_key(client, org):
    params = {"protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {}}
    params["clientInfo"] = {"name": "test", "version": "1"}
    instructions = rpc(client, org.sdk, "initialize", params).json["result"]["instructions"]
    assert "only create_key's and rotate_key's answers carry a full key" in instructions
    assert "shown once" in instructions


def call_at(client, key, version, tool, arguments) -> dict:
    params = {"name": tool, "arguments": arguments}
    response = rpc(client, key, "tools/call", params, version=version)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.json["result"]


def test_an_unknown_tool_is_a_protocol_error(client, org):
    response = rpc(client, org.sdk, "tools/call", {"name": "rotate_everything", "arguments": {}})
    assert response.status_code == 200
    assert response.json["error"]["code"] == -32602


def test_an_unknown_method_is_a_protocol_error(client, org):
    response = rpc(client, org.sdk, "keys/list")
    assert response.json["error"]["code"] == -32601


def test_no_error_repeats_a_key_the_request_carried(client, org):
    """A full key as a tool's name, a method, or an argument's name comes back as its shown
    form `<identifier>...` (docs/design.md, "Requests and errors")."""
    key = keyformat.new_key("ak_")[1]
    shown = keyformat.shown(keyformat.identifier_of(key))
    as_tool = rpc(client, org.sdk, "tools/call", {"name": key, "arguments": {}})
    as_method = rpc(client, org.sdk, key)
    arguments = {"name": "n", "kind": "telemetry", key: 1}
    as_argument = rpc(client, org.sdk, "tools/call", {"name": "create_key", "arguments": arguments})
    assert as_tool.json["error"]["code"] == -32602
    assert as_method.json["error"]["code"] == -32601
    assert refused(as_argument.json["result"])["errors"] == {shown: [WORDS["Unknown field."]]}
    for response in (as_tool, as_method, as_argument):
        text = response.get_data(as_text=True)
        assert key not in text and shown in text, text


# The tools: their schemas are the OpenAPI document's.


def test_the_tools_and_their_annotations(client, org):
    tools = listed(client, org.sdk)
    assert tuple(tools) == TOOLS
    hints = {
        name: (
            tool["annotations"]["readOnlyHint"],
            tool["annotations"]["destructiveHint"],
            tool["annotations"]["openWorldHint"],
        )
        for name, tool in tools.items()
    }
    assert hints == {
        "list_keys": (True, False, False),
        "get_key": (True, False, False),
        "create_key": (False, False, False),
        "update_key": (False, False, False),
        "rotate_key": (False, True, False),
        "get_key_usage": (True, False, False),
        "list_identities": (True, False, False),
        "delete_key": (False, True, False),
        "get_identity": (True, False, False),
        "create_identity": (False, False, False),
        "update_identity": (False, False, False),
        "delete_identity": (False, True, False),
        "get_identity_usage": (True, False, False),
    }


def test_input_schemas_list_kinds_and_scopes_and_state_the_bounds(client, org):
    tools = listed(client, org.sdk)
    listing = tools["list_keys"]["inputSchema"]["properties"]
    assert listing["page_size"]["minimum"] == 1
    assert listing["page_size"]["maximum"] == 200
    assert listing["page"]["minimum"] == 1
    assert listing["kind"]["enum"] == list(KINDS)
    assert listing["state"]["enum"] == ["active", "expired"]
    assert listing["unused_since"]["format"] == "date-time"
    rotate = tools["rotate_key"]["inputSchema"]
    assert rotate["required"] == ["key"]
    assert rotate["properties"]["grace_seconds"]["minimum"] == 0
    assert rotate["properties"]["grace_seconds"]["maximum"] == MAX_GRACE_SECONDS
    assert rotate["properties"]["expires_at"]["format"] == "date-time"
    for name in ("create_key", "update_key"):
        schema = tools[name]["inputSchema"]
        assert schema["additionalProperties"] is False
        assert schema["properties"]["scopes"]["items"]["enum"] == list(SCOPES)
        assert schema["properties"]["name"]["minLength"] == 1
        assert schema["properties"]["name"]["maxLength"] == NAME_MAX_LENGTH
        assert schema["properties"]["expires_at"]["format"] == "date-time"
        assert not {"immutable", "last_used", "created", "updated", "created_by"} & set(
            schema["properties"]
        )
    assert tools["create_key"]["inputSchema"]["properties"]["kind"]["enum"] == list(KINDS)
    assert tools["create_key"]["inputSchema"]["required"] == ["kind", "name"]
    for name in ("get_key", "update_key", "rotate_key", "delete_key"):
        assert tools[name]["inputSchema"]["required"][0] == "key"
        assert tools[name]["inputSchema"]["properties"]["key"]["type"] == "string"


# A row of docs/mcp.md's table of tools: | `tool` | twin | arguments | what it does |
_TOOL_ROW = re.compile(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", re.MULTILINE)
# An argument in that cell: its name, and what the parentheses after it say of it.
_ARGUMENT = re.compile(r"`(\w+)`(?:\s*\((?:[^()]|\([^()]*\))*\))?")


def test_the_docs_table_of_tools_lists_every_argument_tools_list_gives(client, org):
    documented = {
        tool: set(_ARGUMENT.findall(cell))
        for tool, cell in _TOOL_ROW.findall((PROJECT / "docs" / "mcp.md").read_text())
    }
    given = {
        name: set(tool["inputSchema"].get("properties", {}))
        for name, tool in listed(client, org.sdk).items()
    }
    assert documented == given


def test_input_and_output_schemas_are_the_documents(app, client, org):
    document = openapi.document(app)
    components = document["components"]["schemas"]
    tools = listed(client, org.sdk)
    create = tools["create_key"]["inputSchema"]
    assert create["allOf"] == components["CreateKey"]["allOf"]
    assert create["properties"]["name"] == components["CreateKey"]["properties"]["name"]
    assert (
        tools["update_key"]["inputSchema"]["properties"]["scopes"]
        == (components["UpdateKey"]["properties"]["scopes"])
    )
    for name in ("get_key", "create_key", "update_key", "rotate_key"):
        assert tools[name]["outputSchema"] == components["KeyOutput"]
    page = tools["list_keys"]["outputSchema"]
    assert page["properties"]["data"]["items"] == components["KeyOutput"]
    assert {k: v for k, v in page.items() if k != "properties"} == {
        k: v for k, v in components["KeyPage"].items() if k != "properties"
    }
    assert "outputSchema" not in tools["delete_key"]  # the REST answer has no body


# The tools: the REST twin's bodies.


def test_list_keys_answers_the_rest_page(client, org):
    result = call(client, org.sdk, "list_keys", {"page_size": 1, "kind": "telemetry"})
    rest = client.get("/api/keys?page_size=1&kind=telemetry", auth=(org.sdk, "")).json
    assert result["isError"] is False
    assert result["structuredContent"] == rest


def test_list_keys_takes_its_numbers_as_json_integers_or_digits(client, org):
    for page_size in (1, "1"):
        result = call(client, org.sdk, "list_keys", {"page_size": page_size})
        assert result["structuredContent"]["page_size"] == 1


def test_get_key_by_each_of_its_names(client, org):
    rest = client.get(f"/api/keys/{org.telemetry}", auth=(org.sdk, "")).json
    identifier = keyformat.identifier_of(org.telemetry)
    for reference in (org.telemetry, identifier, keyformat.shown(identifier)):
        result = call(client, org.sdk, "get_key", {"key": reference})
        assert result["structuredContent"] == rest


def test_create_key_answers_the_full_key_once_then_get_key_shows_it(client, org):
    arguments = {"name": "  agent  ", "kind": "custom", "scopes": ["site:read", "site:read"]}
    created = call(client, org.sdk, "create_key", arguments)["structuredContent"]
    assert keyformat.is_full_key(created["key"])
    assert (created["name"], created["kind"], created["scopes"]) == (
        "agent",
        "custom",
        ["site:read"],
    )
    shown = call(client, org.sdk, "get_key", {"key": created["key"]})["structuredContent"]
    assert shown == created | {"key": keyformat.shown(keyformat.identifier_of(created["key"]))}
    assert client.get("/api/keys", auth=(created["key"], "")).status_code == 200


def test_update_key_answers_the_updated_key(client, org, make_key):
    key = make_key("custom", ("site:read",))
    arguments = {"key": key, "name": "renamed", "scopes": ["site:write"]}
    updated = call(client, org.sdk, "update_key", arguments)["structuredContent"]
    assert (updated["name"], updated["scopes"]) == ("renamed", ["site:write"])
    assert client.get(f"/api/keys/{key}", auth=(org.sdk, "")).json == updated


def test_list_keys_filters_by_state_and_unused_since_as_rest_does(client, org, make_key, sql):
    expired = keyformat.identifier_of(make_key("custom", ("site:read",)))
    sql(
        "UPDATE api_keys SET expires_at = :past WHERE identifier = :key",
        past=PAST_NAIVE,
        key=expired,
    )
    for query in ({"state": "expired"}, {"state": "active"}, {"unused_since": in_seconds(60)}):
        result = call(client, org.sdk, "list_keys", query)
        rest = client.get("/api/keys", query_string=query, auth=(org.sdk, "")).json
        assert result["structuredContent"] == rest
    listing = call(client, org.sdk, "list_keys", {"state": "expired"})["structuredContent"]
    assert (listing["total_count"], listing["data"][0]["key"]) == (1, keyformat.shown(expired))


def test_create_and_update_key_set_the_expiry(client, org):
    expiry = in_seconds(3600)
    arguments = {"name": "temp", "kind": "custom", "scopes": ["site:read"], "expires_at": expiry}
    created = call(client, org.sdk, "create_key", arguments)["structuredContent"]
    assert created["expires_at"] is not None
    assert created["created_by"] == keyformat.shown(keyformat.identifier_of(org.sdk))
    cleared = call(client, org.sdk, "update_key", {"key": created["key"], "expires_at": None})
    assert cleared["structuredContent"]["expires_at"] is None


def test_create_and_update_key_keep_within_the_organizations_policy(client, org, runner):
    """The organization's policy, through the same service as REST: the refusal is REST's."""
    set_policy = ["org", "policy", "acme", "--max-key-lifetime-days", "30", "--max-keys", "3"]
    assert runner.invoke(args=set_policy).exit_code == 0
    arguments = {"name": "temp", "kind": "custom", "scopes": ["site:read"]}
    created = call(client, org.sdk, "create_key", arguments)["structuredContent"]
    assert created["expires_at"] is not None  # the longest allowed
    body = refused(call(client, org.sdk, "create_key", arguments))
    assert (body["status"], body["code"]) == (409, "key_limit_reached")
    body = refused(call(client, org.sdk, "update_key", {"key": created["key"], "expires_at": None}))
    assert (body["status"], body["code"]) == (403, "organization_policy")
    assert list(body["errors"]) == ["expires_at"]
    assert "at most 30 days" in body["detail"]
    outside = call(client, org.sdk, "list_keys", {"outside_policy": True})["structuredContent"]
    assert [key["name"] for key in outside["data"]] == ["Telemetry", "SDK Integration"]


def test_rotate_key_answers_the_replacement_once_and_ends_the_old_key(client, org, make_key):
    old = make_key("custom", ("site:read",))
    result = call(client, org.sdk, "rotate_key", {"key": old, "grace_seconds": 60})
    assert result["isError"] is False
    replacement = result["structuredContent"]
    assert keyformat.is_full_key(replacement["key"])
    assert (replacement["name"], replacement["kind"], replacement["scopes"]) == (
        "test key",
        "custom",
        ["site:read"],
    )
    shown = client.get(f"/api/keys/{replacement['key']}", auth=(org.sdk, "")).json
    assert shown == replacement | {"key": shown["key"]}
    old_key = client.get(f"/api/keys/{old}", auth=(org.sdk, "")).json
    assert old_key["expires_at"] is not None  # working for its grace period, then not
    assert client.get("/api/keys", auth=(old, "")).status_code == 200
    again = call(client, org.sdk, "rotate_key", {"key": replacement["key"]})["structuredContent"]
    assert client.get("/api/keys", auth=(replacement["key"], "")).status_code == 401
    assert client.get("/api/keys", auth=(again["key"], "")).status_code == 200


def test_rotate_key_is_recorded_as_the_rest_rotation_is(client, org, make_key):
    old = make_key("custom", ("site:read",))
    new = call(client, org.sdk, "rotate_key", {"key": old})["structuredContent"]["key"]
    events = client.get("/api/audit", auth=(org.sdk, "")).json["data"]
    rotation, creation = events[:2]  # newest first
    assert (rotation["action"], creation["action"]) == ("key.rotated", "key.created")
    assert rotation["target"] == keyformat.shown(keyformat.identifier_of(old))
    assert rotation["actor"] == keyformat.shown(keyformat.identifier_of(org.sdk))
    assert rotation["details"] == {"replacement": creation["target"], "grace_seconds": 0}
    assert creation["target"] == keyformat.shown(keyformat.identifier_of(new))


def test_delete_key_revokes_the_key_and_says_so_without_a_body(client, org, make_key):
    key = make_key("custom", ("site:read",))
    result = call(client, org.sdk, "delete_key", {"key": key})
    assert result["isError"] is False
    assert "structuredContent" not in result
    assert "no longer authenticates" in result["content"][0]["text"]
    assert client.get("/api/keys", auth=(key, "")).status_code == 401


def test_the_text_content_is_the_structured_content_as_json(client, org):
    result = call(client, org.sdk, "list_keys", {})
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


# Refusals: isError, with the REST refusal's body (its code included) as JSON text, and no
# structured content: a result that has some must match the tool's output schema.

# (tool, arguments, REST method, path, body): the same request both ways. `{telemetry}` is
# the organization's telemetry key (immutable scopes).
REFUSALS = [
    ("list_keys", {"page_size": 0}, "GET", "/api/keys?page_size=0", None),
    ("list_keys", {"page_size": 201}, "GET", "/api/keys?page_size=201", None),
    ("list_keys", {"page": "x"}, "GET", "/api/keys?page=x", None),
    ("list_keys", {"kind": "admin"}, "GET", "/api/keys?kind=admin", None),
    ("list_keys", {"pagesize": 5}, "GET", "/api/keys?pagesize=5", None),
    ("get_key", {"key": "ak_unknown..."}, "GET", "/api/keys/ak_unknown...", None),
    (
        "create_key",
        {"name": " ", "kind": "custom", "scopes": ["site:read"]},
        "POST",
        "/api/keys",
        {"name": " ", "kind": "custom", "scopes": ["site:read"]},
    ),
    (
        "create_key",
        {"name": "x", "kind": "custom"},
        "POST",
        "/api/keys",
        {"name": "x", "kind": "custom"},
    ),
    (
        "create_key",
        {"name": "x", "kind": "telemetry", "scopes": ["site:read"]},
        "POST",
        "/api/keys",
        {"name": "x", "kind": "telemetry", "scopes": ["site:read"]},
    ),
    (
        "create_key",
        {"name": "x" * 201, "kind": "root", "scopes": ["everything"], "owner": "me"},
        "POST",
        "/api/keys",
        {"name": "x" * 201, "kind": "root", "scopes": ["everything"], "owner": "me"},
    ),
    (
        "create_key",
        {"name": None, "kind": "custom", "scopes": ["site:read"]},
        "POST",
        "/api/keys",
        {"name": None, "kind": "custom", "scopes": ["site:read"]},
    ),
    (
        "update_key",
        {"key": "{telemetry}", "scopes": ["site:read"]},
        "PUT",
        "/api/keys/{telemetry}",
        {"scopes": ["site:read"]},
    ),
    (
        "update_key",
        {"key": "{telemetry}", "kind": "custom"},
        "PUT",
        "/api/keys/{telemetry}",
        {"kind": "custom"},
    ),
    (
        "update_key",
        {"key": "{telemetry}", "name": "x", "kind": "custom"},
        "PUT",
        "/api/keys/{telemetry}",
        {"name": "x", "kind": "custom"},
    ),
    (
        "update_key",
        {"key": "ak_unknown", "name": "x"},
        "PUT",
        "/api/keys/ak_unknown",
        {"name": "x"},
    ),
    ("delete_key", {"key": "ak_unknown"}, "DELETE", "/api/keys/ak_unknown", None),
    ("list_keys", {"state": "gone"}, "GET", "/api/keys?state=gone", None),
    ("list_keys", {"unused_since": "now"}, "GET", "/api/keys?unused_since=now", None),
    (
        "create_key",
        {"name": "x", "kind": "custom", "scopes": ["site:read"], "expires_at": PAST},
        "POST",
        "/api/keys",
        {"name": "x", "kind": "custom", "scopes": ["site:read"], "expires_at": PAST},
    ),
    (
        "update_key",
        {"key": "{telemetry}", "expires_at": "tomorrow"},
        "PUT",
        "/api/keys/{telemetry}",
        {"expires_at": "tomorrow"},
    ),
    ("rotate_key", {"key": "ak_unknown"}, "POST", "/api/keys/ak_unknown/rotate", {}),
    (
        "rotate_key",
        {"key": "{telemetry}", "grace_seconds": -1},
        "POST",
        "/api/keys/{telemetry}/rotate",
        {"grace_seconds": -1},
    ),
    (
        "rotate_key",
        {"key": "{telemetry}", "grace_seconds": MAX_GRACE_SECONDS + 1},
        "POST",
        "/api/keys/{telemetry}/rotate",
        {"grace_seconds": MAX_GRACE_SECONDS + 1},
    ),
    (
        "rotate_key",
        {"key": "{telemetry}", "expires_at": PAST},
        "POST",
        "/api/keys/{telemetry}/rotate",
        {"expires_at": PAST},
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "method", "path", "body"), REFUSALS)
def test_a_refusal_is_an_error_result_with_the_rest_body(
    client, org, tool, arguments, method, path, body
):
    telemetry = keyformat.identifier_of(org.telemetry)
    arguments = {
        k: v.format(telemetry=telemetry) if k == "key" else v for k, v in arguments.items()
    }
    result = call(client, org.sdk, tool, arguments)
    rest = client.open(
        path.format(telemetry=telemetry), method=method, json=body, auth=(org.sdk, "")
    )
    assert rest.status_code >= 400
    assert refused(result) == rest.json


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "message"),
    [
        ("get_key", {}, "key", WORDS["Missing data for required field."]),
        ("get_key", {"key": 5}, "key", WORDS["Not a valid string."]),
        ("get_key", {"key": "x", "name": "y"}, "name", WORDS["Unknown field."]),
        ("delete_key", {}, "key", WORDS["Missing data for required field."]),
        ("update_key", {"name": "x"}, "key", WORDS["Missing data for required field."]),
        ("rotate_key", {"grace_seconds": 5}, "key", WORDS["Missing data for required field."]),
    ],
)
def test_a_tool_that_names_no_key_is_refused_naming_key(
    client, org, tool, arguments, field, message
):
    refusal = refused(call(client, org.sdk, tool, arguments))
    assert (refusal["status"], refusal["code"]) == (422, "validation_error")
    assert refusal["errors"] == {field: [message]}


def test_a_second_delete_is_not_found(client, org, make_key):
    key = make_key("custom", ("site:read",))
    assert call(client, org.sdk, "delete_key", {"key": key})["isError"] is False
    second = call(client, org.sdk, "delete_key", {"key": key})
    assert refused(second)["code"] == "not_found"


def test_a_key_of_another_organization_does_not_exist(client, org, other_org):
    result = call(client, org.sdk, "get_key", {"key": other_org.telemetry})
    assert refused(result)["code"] == "not_found"


def test_a_refused_call_writes_nothing(client, org, sql):
    before = sql("SELECT identifier, name, scope_bits, updated FROM api_keys ORDER BY id")
    telemetry = keyformat.identifier_of(org.telemetry)
    call(client, org.sdk, "update_key", {"key": telemetry, "name": "x", "scopes": ["site:read"]})
    call(client, org.sdk, "create_key", {"name": "x", "kind": "custom", "scopes": []})
    assert sql("SELECT identifier, name, scope_bits, updated FROM api_keys ORDER BY id") == before


def test_a_database_that_does_not_answer_is_the_rest_503(client, org, monkeypatch):
    def down(*args, **kwargs):
        raise OperationalError("SELECT", {}, Exception("connection refused"))

    monkeypatch.setattr(service, "find_key", down)
    refusal = refused(call(client, org.sdk, "get_key", {"key": org.sdk}))
    assert (refusal["status"], refusal["code"]) == (503, "unavailable")


def test_a_fault_is_the_rest_500_without_its_detail(client, org, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("a secret detail")

    monkeypatch.setattr(service, "find_key", broken)
    result = call(client, org.sdk, "get_key", {"key": org.sdk})
    refusal = refused(result)
    assert (refusal["status"], refusal["code"]) == (500, "internal_error")
    assert "secret" not in str(result)
    assert "An MCP tool call failed" in caplog.text


def tools_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == TOOLS_THREAD}


def test_closing_the_server_ends_its_threads(app, client, org):
    """This application's threads, whatever another test's application left running."""
    others = tools_threads()
    assert call(client, org.sdk, "list_keys", {})["isError"] is False
    runtime = app.extensions.pop("mcp")
    ours = tools_threads() - others
    assert ours
    runtime.close()
    assert not runtime.thread.is_alive()
    deadline = time.monotonic() + 10
    while any(thread.is_alive() for thread in ours):
        assert time.monotonic() < deadline, "the tools' thread outlived its server"
        time.sleep(0.01)


def test_a_server_that_cannot_start_is_made_again_on_the_next_request(
    app, client, org, monkeypatch
):
    @asynccontextmanager
    async def failing(manager):
        raise OSError("no event loop for you")
        yield

    monkeypatch.setattr(mcp_server.StreamableHTTPSessionManager, "run", failing)
    with pytest.raises(RuntimeError, match="did not start"):  # TESTING: raised, not a 500
        rpc(client, org.sdk, "tools/list")
    assert "mcp" not in app.extensions
    monkeypatch.undo()
    assert rpc(client, org.sdk, "tools/list").status_code == 200


# Memory: a worker that never serves /mcp never imports the SDK.

SERVE_REST_ONLY = """
import sys
from app import create_app
from app.storage.database import upgrade
from app.keys import operator

app = create_app({"SQLALCHEMY_DATABASE_URI": sys.argv[1]})
upgrade(app)
with app.app_context():
    _, keys = operator.create_organization("acme")
sdk = next(full for key, full in keys if key.kind == "sdk_integration")
client = app.test_client()
assert client.get("/api/keys", auth=(sdk, "")).status_code == 200
assert client.get("/mcp").status_code == 405
assert client.delete("/mcp").status_code == 405
assert client.post("/mcp", json={}).status_code == 401
SDK = ("mcp", "mcp_types", "a2wsgi")
sdk_modules = lambda: sorted(m for m in sys.modules if m.split(".")[0] in SDK)
print(sdk_modules())
message = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
headers = {"Authorization": "Bearer " + sdk, "Accept": "application/json"}
assert client.post("/mcp", json=message, headers=headers).status_code == 200
print(bool(sdk_modules()))
"""


def test_only_a_worker_that_serves_mcp_imports_the_sdk(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    completed = run([sys.executable, "-c", SERVE_REST_ONLY, url], timeout=120)
    assert completed.stdout.split() == ["[]", "True"]


def test_list_identities_and_a_key_made_in_one_show_its_holder(client, org):
    """Identities (docs/design.md): create_key takes `identity`, get_key shows it, and
    list_identities reads the organization's identities, as their REST twins do."""
    made = client.post(
        "/api/identities",
        json={"external_id": "customer-7", "quota": {"requests": 5, "period": "day"}},
        auth=(org.sdk, ""),
    ).json
    listed_ = call(client, org.sdk, "list_identities", {"external_id": "customer-7"})
    assert listed_["structuredContent"]["data"][0]["id"] == made["id"]
    assert listed_["structuredContent"]["data"][0]["quota_remaining"] == 5
    key = call(
        client,
        org.sdk,
        "create_key",
        {"name": "held", "kind": "custom", "scopes": ["monitor:read"], "identity": "customer-7"},
    )["structuredContent"]
    shown = call(client, org.sdk, "get_key", {"key": key["key"]})["structuredContent"]
    assert shown["identity"] == {"id": made["id"], "external_id": "customer-7"}


# What an agent reads: every field a tool takes named, usage without empty days, refusals
# that point where an agent can read.


def test_update_keys_description_names_every_field_it_updates(client, org):
    tool = listed(client, org.sdk)["update_key"]
    fields = set(tool["inputSchema"]["properties"]) - {"key", "kind"}
    assert fields == UPDATABLE
    unnamed = [field for field in sorted(fields) if f"`{field}`" not in tool["description"]]
    assert unnamed == []


def test_get_key_usage_gives_the_totals_first_and_only_the_days_with_uses(client, org):
    for _ in range(3):
        client.get("/api/keys", auth=(org.sdk, ""))
    usage_counter.flush(client.application)
    key = keyformat.shown(keyformat.identifier_of(org.sdk))
    result = call(client, org.sdk, "get_key_usage", {"key": key})
    body = result["structuredContent"]
    rest = client.get(f"/api/keys/{key}/usage", auth=(org.sdk, "")).json
    assert next(iter(body)) == "total"
    assert body["total"] == rest["total"] and body["total"]["allowed"] >= 3
    assert len(rest["buckets"]) == 31
    assert (
        body["buckets"] == [b for b in rest["buckets"] if b["allowed"] or b["refused"]]
        and len(body["buckets"]) == 1
    )
    # Once: the text is a sentence of the totals, not the same JSON again.
    [item] = result["content"]
    assert item["text"].startswith(f"{body['total']['allowed']} allowed, 0 refused")
    assert "{" not in item["text"]


@pytest.mark.parametrize(("tool", "arguments", "method", "path", "body"), REFUSALS[:8])
def test_a_refusal_points_an_agent_at_what_it_can_read(
    client, org, tool, arguments, method, path, body
):
    result = call(client, org.sdk, tool, arguments)
    assert ".md" not in result["content"][0]["text"]


# The identities' tools: the REST twins' bodies and refusals.


def test_the_identity_tools_answer_the_rest_bodies(client, org):
    made = call(client, org.sdk, "create_identity", {"external_id": "c-1", "name": "C 1"})
    identity = made["structuredContent"]
    rest = client.get(f"/api/identities/{identity['id']}", auth=(org.sdk, "")).json
    assert identity == rest
    for named in (identity["id"], "external_id:c-1"):
        got = call(client, org.sdk, "get_identity", {"identity": named})
        assert got["structuredContent"] == rest
    quota = {"requests": 5, "period": "day"}
    changed = call(client, org.sdk, "update_identity", {"identity": identity["id"], "quota": quota})
    assert changed["structuredContent"]["quota"] == quota
    assert (
        changed["structuredContent"]
        == client.get(f"/api/identities/{identity['id']}", auth=(org.sdk, "")).json
    )
    usage = call(
        client, org.sdk, "get_identity_usage", {"identity": identity["id"], "granularity": "hour"}
    )
    rest_usage = client.get(
        f"/api/identities/{identity['id']}/usage?granularity=hour", auth=(org.sdk, "")
    ).json
    assert usage["structuredContent"]["identity"] == identity["id"]
    assert usage["structuredContent"]["total"] == rest_usage["total"]
    again = call(client, org.sdk, "create_identity", {"external_id": "c-1"})
    assert refused(again)["code"] == "identity_exists"
    gone = call(client, org.sdk, "delete_identity", {"identity": identity["id"]})
    assert gone["content"][0]["text"] == "Deleted: the identity is gone."
    missing = call(client, org.sdk, "get_identity", {"identity": identity["id"]})
    assert refused(missing)["status"] == 404
    for tool, arguments in (
        ("get_identity", {}),
        ("get_identity", {"identity": 5}),
        ("get_identity", {"identity": "id_x", "other": 1}),
        ("update_identity", {"identity": "id_x", "quota": "lots"}),
        ("get_identity_usage", {"identity": "external_id:nobody"}),
    ):
        answer = refused(call(client, org.sdk, tool, arguments))
        assert answer["status"] in (404, 422), (tool, answer)


def test_the_identity_tools_keep_the_boundary(client, org):
    for external_id in ("partner", "customer"):
        call(client, org.sdk, "create_identity", {"external_id": external_id})
    body = {"name": "p", "kind": "sdk_integration", "identity": "partner"}
    partner = client.post("/api/keys", json=body, auth=(org.sdk, "")).json["key"]
    own = call(client, partner, "get_identity", {"identity": "external_id:partner"})
    assert own["structuredContent"]["external_id"] == "partner"
    assert "structuredContent" in call(
        client, partner, "get_identity_usage", {"identity": "external_id:partner"}
    )
    for tool in ("get_identity", "get_identity_usage"):
        other = call(client, partner, tool, {"identity": "external_id:customer"})
        assert refused(other)["status"] == 404
    for tool, arguments in (
        ("create_identity", {"external_id": "mine"}),
        ("update_identity", {"identity": "external_id:partner", "name": "n"}),
        ("delete_identity", {"identity": "external_id:customer"}),
    ):
        assert refused(call(client, partner, tool, arguments))["code"] == "forbidden", tool
    listed_identities = call(client, partner, "list_identities", {})["structuredContent"]
    assert [i["external_id"] for i in listed_identities["data"]] == ["partner"]
