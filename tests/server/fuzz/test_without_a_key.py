"""Every operation fuzzed without a key, with a key of one scope, and /mcp with a Bearer key
(fuzzing.py says what each answer must be)."""

from __future__ import annotations

from schemathesis import GenerationMode

from tests.server.fuzz.fuzzing import assert_consistent, basic, bearer, fuzz_operations
from tests.server.test_gunicorn import sdk_key


def test_every_operation_without_a_key_and_with_a_narrow_one(server, api):
    key = sdk_key(server)
    fuzz_operations(api, {})
    # A key with one scope: creates and updates meet 403 scope_exceeds_caller.
    narrow = server.request(
        "POST", "/api/keys", key, {"name": "narrow", "kind": "custom", "scopes": ["site:read"]}
    )
    assert narrow.status == 201, narrow.body
    fuzz_operations(api, basic(narrow.json()["key"]), modes=[GenerationMode.POSITIVE])
    fuzz_operations(api, bearer(key), paths={"/mcp"})  # the MCP server takes Bearer keys only
    assert_consistent(server, key)
