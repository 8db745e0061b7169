"""Sequences of create, get, update and delete that follow the links from a create response
to the new key, fuzzed (fuzzing.py says what each answer must be)."""

from __future__ import annotations

from tests.server.fuzz.fuzzing import WORKFLOW_SETTINGS, assert_consistent, basic, workflow
from tests.server.test_gunicorn import sdk_key


def test_sequences_that_follow_the_links_from_a_created_key(server, api):
    key = sdk_key(server)
    workflow(api, basic(key)).run(settings=WORKFLOW_SETTINGS)
    assert_consistent(server, key)
