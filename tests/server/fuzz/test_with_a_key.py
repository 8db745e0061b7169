"""Every operation fuzzed with a managing key, valid and invalid input (tests/server/fuzzing.py
says what each answer must be)."""

from __future__ import annotations

from tests.server.fuzz.fuzzing import assert_consistent, basic, fuzz_operations
from tests.server.test_gunicorn import sdk_key


def test_every_operation_with_a_managing_key(server, api):
    key = sdk_key(server)
    fuzz_operations(api, basic(key))
    assert_consistent(server, key)
