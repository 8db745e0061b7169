"""POST /api/revoke, for leaked keys (docs/design.md, "Leaked keys"): no authentication; every
listed key that exists is deleted at once and recorded as `key.revoked` by `leak-report`;
the answer is 202 `{"received": N}` whatever the keys were."""

from __future__ import annotations

import re

import pytest

from app.domain import keyformat
from app.domain.keyformat import identifier_of, new_key

URL = "/api/revoke"
# The regular expression docs/security.md gives secret scanners.
LEAKED = re.compile(r"\bak_[0-9A-Za-z]{50}\b")


def test_listed_keys_are_deleted_and_the_answer_tells_nothing(client, org, make_key, other_org):
    leaked = make_key("custom", ("site:read",))
    unknown = new_key("ak_")[1]
    body = {"keys": [leaked, unknown, "not a key", other_org.telemetry, leaked]}
    answer = client.post(URL, json=body)
    assert (answer.status_code, answer.json) == (202, {"received": 5})
    assert answer.headers["Cache-Control"] == "no-store"
    assert client.get("/api/keys", auth=(leaked, "")).status_code == 401
    assert client.get("/api/keys", auth=(other_org.telemetry, "")).status_code == 401
    nothing = client.post(URL, json={"keys": [new_key("ak_")[1]]})
    assert (nothing.status_code, nothing.json) == (202, {"received": 1})


def test_each_revocation_is_recorded_as_a_leak_report(client, org, make_key):
    leaked = make_key("custom", ("site:read",))
    client.post(URL, json={"keys": [leaked]})
    [event] = client.get("/api/audit?action=key.revoked", auth=(org.sdk, "")).json["data"]
    assert (event["actor"], event["target"]) == (
        "leak-report",
        keyformat.shown(identifier_of(leaked)),
    )
    assert event["details"] == {}
    assert leaked not in str(event)


@pytest.mark.parametrize("padded", [" {key}\n", "\t{key}\r\n", "{key}  "])
def test_a_key_copied_with_white_space_around_it_is_still_that_key(client, org, make_key, padded):
    leaked = make_key("custom", ("site:read",))
    answer = client.post(URL, json={"keys": [padded.format(key=leaked)]})
    assert (answer.status_code, answer.json) == (202, {"received": 1})
    assert client.get("/api/keys", auth=(leaked, "")).status_code == 401
    [event] = client.get("/api/audit?action=key.revoked", auth=(org.sdk, "")).json["data"]
    assert event["target"] == keyformat.shown(identifier_of(leaked))


@pytest.mark.parametrize(
    "body",
    [{}, {"keys": []}, {"keys": "ak_x"}, {"keys": [5]}, {"keys": ["a"] * 101}, {"keys": []}],
)
def test_a_body_of_another_shape_is_422(client, body):
    answer = client.post(URL, json=body)
    assert (answer.status_code, answer.json["code"]) == (422, "validation_error")


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"data": b"keys=x", "content_type": "text/plain"}, 415),
        ({"data": b"{", "content_type": "application/json"}, 400),
    ],
)
def test_a_body_that_is_not_json_is_refused_as_everywhere(client, kwargs, status):
    assert client.post(URL, **kwargs).status_code == status


@pytest.mark.parametrize("app_config", [{"RATELIMIT_AUTH_FAILURES": "2/minute"}])
def test_each_report_counts_toward_the_failed_authentication_limit(client, org):
    assert [client.post(URL, json={"keys": ["x"]}).status_code for _ in range(3)] == [202, 202, 429]
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 429  # the same address


def test_the_readmes_expression_finds_every_key_and_nothing_shorter():
    keys = [new_key(prefix)[1] for prefix in ("ak_",) * 50]
    text = " ".join(f"token={key};" for key in keys) + " ak_short ak_" + "x" * 51
    assert LEAKED.findall(text) == keys
    assert all(keyformat.is_full_key(found) for found in LEAKED.findall(text))
