"""Every operation fuzzed with a managing key, valid and invalid input (tests/server/fuzzing.py
says what each answer must be)."""

from __future__ import annotations

from tests.server.fuzzing import api, assert_consistent, basic, fuzz_operations, server  # noqa: F401
from tests.server.test_gunicorn import sdk_key


def test_every_operation_with_a_managing_key(server, api):  # noqa: F811
    key = sdk_key(server)
    fuzz_operations(api, basic(key))
    assert_consistent(server, key)
