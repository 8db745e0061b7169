"""Idempotent writes (docs/design.md, "Idempotent writes"): `Idempotency-Key` on POST /api/keys,
rotations, quota grants and POST /api/webhooks, and MCP's `idempotency_key`."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import inspect

from app import idempotency
from app.domain import keyformat
from app.domain.timestamps import utcnow
from app.extensions import db
from app.storage import queries

HEADER = "Idempotency-Key"
BODY = {"name": "deploy", "kind": "custom", "scopes": ["monitor:read"]}


@pytest.fixture
def app_config() -> dict:
    return {"WEBHOOK_ALLOW_PRIVATE": True}


def create(client, key: str, idempotency_key: str | None, body: dict = BODY):
    headers = {} if idempotency_key is None else {HEADER: idempotency_key}
    return client.post("/api/keys", json=body, auth=(key, ""), headers=headers)


def total(client, org) -> int:
    return client.get("/api/keys", auth=(org.sdk, "")).json["total_count"]


def every_stored_value(app) -> list[object]:
    """Every value of every column of every table of the service's database."""
    values: list[object] = []
    with app.app_context():
        tables = inspect(db.engine).get_table_names()
        with db.engine.connect() as connection:
            for table in tables:
                rows = connection.exec_driver_sql(f'SELECT * FROM "{table}"')  # noqa: S608
                values += [value for row in rows for value in row]
    return values


def holds(value: object, secret: str) -> bool:
    if isinstance(value, memoryview | bytes | bytearray):
        return secret.encode() in bytes(value)
    return secret in str(value)


def test_a_retry_answers_the_first_answer_with_its_full_key_and_makes_no_other(client, org):
    key = str(uuid.uuid4())
    before = total(client, org)
    first = create(client, org.sdk, key)
    assert first.status_code == 201, first.json
    assert idempotency.REPLAYED not in first.headers
    again = create(client, org.sdk, key)
    assert again.status_code == 201, again.json
    assert again.json == first.json
    assert keyformat.is_full_key(again.json["key"])
    assert again.headers["Location"] == first.headers["Location"]
    assert again.headers["Content-Type"] == "application/json"
    assert again.headers[idempotency.REPLAYED] == "true"
    assert total(client, org) == before + 1
    # The replayed key is the one made: it authenticates.
    assert client.get("/api/keys", auth=(again.json["key"], "")).status_code == 200


def test_no_full_key_nor_secret_is_stored_in_clear_for_a_replayed_create(app, client, org):
    key = str(uuid.uuid4())
    first = create(client, org.sdk, key)
    assert create(client, org.sdk, key).json["key"] == first.json["key"]
    full_key = first.json["key"]
    secret = full_key[len(keyformat.identifier_of(full_key)) :]
    values = every_stored_value(app)
    assert values, "the database holds rows"
    for value in values:
        assert not holds(value, full_key), value
        assert not holds(value, secret[:16]), value
        assert not holds(value, key), value  # nor the Idempotency-Key itself


def test_the_same_key_for_another_body_is_refused(client, org):
    key = str(uuid.uuid4())
    assert create(client, org.sdk, key).status_code == 201
    before = total(client, org)
    other = create(client, org.sdk, key, BODY | {"name": "another"})
    assert other.status_code == 422, other.json
    assert other.json["code"] == "idempotency_key_reused"
    assert HEADER in other.json["errors"]
    # Another path with the same key: another request too.
    rotated = client.post(
        f"/api/keys/{org.telemetry}/rotate", auth=(org.sdk, ""), headers={HEADER: key}
    )
    assert rotated.json["code"] == "idempotency_key_reused"
    assert total(client, org) == before


@pytest.mark.parametrize("value", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_malformed_idempotency_key_is_refused_naming_the_header(client, org, value):
    before = total(client, org)
    response = client.post("/api/keys", json=BODY, auth=(org.sdk, ""), headers=[(HEADER, value)])
    assert response.status_code == 422, response.json
    assert response.json["code"] == "validation_error"
    assert list(response.json["errors"]) == [HEADER]
    assert total(client, org) == before


def test_the_longest_idempotency_key_is_taken(client, org):
    assert create(client, org.sdk, "~" * 255).status_code == 201


def test_a_refusal_is_not_kept_so_a_retry_may_succeed(client, org):
    key = str(uuid.uuid4())
    refused = create(client, org.sdk, key, BODY | {"kind": "nonsense"})
    assert refused.status_code == 422
    assert refused.json["code"] == "validation_error"
    # The same key with a right body: a new request, done.
    assert create(client, org.sdk, key).status_code == 201
    forbidden = create(client, org.telemetry, key)
    assert forbidden.status_code == 403  # another caller, and refused before anything


def test_each_caller_has_its_own_keys(client, org, make_key):
    key = str(uuid.uuid4())
    other = make_key("sdk_integration")
    first = create(client, org.sdk, key)
    second = create(client, other, key)
    assert second.status_code == 201
    assert idempotency.REPLAYED not in second.headers
    assert second.json["key"] != first.json["key"]


def _secrets(app, caller_key: str, idempotency_key: str):
    with app.test_request_context():
        holder = queries.holder(keyformat.digest(caller_key))
        return idempotency._secrets(holder.caller, idempotency_key)


def test_while_the_first_runs_a_retry_gets_409(app, client, org, sql):
    key = str(uuid.uuid4())
    # The first request's claim, as it stands while its write runs: no answer yet. Its
    # fingerprint is the request's own, so the retry is no other request.
    secrets = _secrets(app, org.sdk, key)
    sent = b"POST /api/keys\n" + json.dumps(BODY).encode()
    fingerprint = hmac.new(secrets.fingerprinting, sent, hashlib.sha256).digest()
    sql(
        "INSERT INTO idempotent_answers (lookup, fingerprint, created) VALUES (:l, :f, :c)",
        l=secrets.lookup,
        f=fingerprint,
        c=utcnow(),
    )
    before = total(client, org)
    response = client.post(
        "/api/keys",
        data=json.dumps(BODY),
        content_type="application/json",
        auth=(org.sdk, ""),
        headers={HEADER: key},
    )
    assert response.status_code == 409, response.json
    assert response.json["code"] == "idempotency_in_progress"
    assert response.headers["Retry-After"] == "1"
    assert total(client, org) == before


def test_an_answer_older_than_24_hours_is_not_replayed(client, org, sql):
    key = str(uuid.uuid4())
    first = create(client, org.sdk, key)
    sql("UPDATE idempotent_answers SET created = :c", c=utcnow() - timedelta(hours=25))
    later = create(client, org.sdk, key)
    assert later.status_code == 201
    assert idempotency.REPLAYED not in later.headers
    assert later.json["key"] != first.json["key"]
    assert len(sql("SELECT lookup FROM idempotent_answers")) == 1


def test_old_answers_are_removed(app, client, org, sql, monkeypatch):
    create(client, org.sdk, str(uuid.uuid4()))
    sql("UPDATE idempotent_answers SET created = :c", c=utcnow() - timedelta(hours=25))
    monkeypatch.setattr(idempotency._Process, "pruned", 0.0)
    create(client, org.sdk, str(uuid.uuid4()))
    assert len(sql("SELECT lookup FROM idempotent_answers")) == 1


def test_ten_concurrent_creates_with_one_key_make_one_key(app, org):
    key = str(uuid.uuid4())
    answers: list = []
    start = threading.Barrier(10)

    def send() -> None:
        client = app.test_client()
        start.wait()
        response = create(client, org.sdk, key)
        answers.append((response.status_code, response.get_json()))

    threads = [threading.Thread(target=send) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client = app.test_client()
    made = [k for k in client.get("/api/keys", auth=(org.sdk, "")).json["data"]]
    assert [k["name"] for k in made].count("deploy") == 1
    created = {body["key"] for status, body in answers if status == 201}
    assert len(created) == 1, answers
    statuses = sorted(status for status, _ in answers)
    assert set(statuses) <= {201, 409}, answers
    assert statuses.count(201) >= 1
    for status, body in answers:
        if status == 409:
            assert body["code"] == "idempotency_in_progress"


def test_a_rotation_is_done_once(client, org, make_key):
    old = make_key("custom", ["monitor:read"])
    key = str(uuid.uuid4())
    first = client.post(f"/api/keys/{old}/rotate", auth=(org.sdk, ""), headers={HEADER: key})
    assert first.status_code == 201, first.json
    again = client.post(f"/api/keys/{old}/rotate", auth=(org.sdk, ""), headers={HEADER: key})
    assert again.status_code == 201, again.json
    assert again.json == first.json
    assert again.headers[idempotency.REPLAYED] == "true"


def test_a_quota_grant_is_added_once(client, org):
    made = create(client, org.sdk, None, BODY | {"quota": {"requests": 10, "period": "day"}})
    shown = made.json["key"]
    key = str(uuid.uuid4())
    grants = [
        client.post(
            f"/api/keys/{shown}/quota", json={"add": 5}, auth=(org.sdk, ""), headers={HEADER: key}
        )
        for _ in range(2)
    ]
    assert [grant.status_code for grant in grants] == [200, 200]
    assert grants[0].json["quota_remaining"] == 15
    assert grants[1].json == grants[0].json
    now = client.get(f"/api/keys/{shown}", auth=(org.sdk, "")).json
    assert now["quota_remaining"] == 15


def test_a_webhook_endpoint_is_made_once_with_its_secret(client, org):
    body = {"url": "http://127.0.0.1:9/hook", "events": ["key.created"]}
    key = str(uuid.uuid4())
    first = client.post("/api/webhooks", json=body, auth=(org.sdk, ""), headers={HEADER: key})
    assert first.status_code == 201, first.json
    again = client.post("/api/webhooks", json=body, auth=(org.sdk, ""), headers={HEADER: key})
    assert again.json == first.json
    assert again.json["secret"].startswith("whsec_")
    assert len(client.get("/api/webhooks", auth=(org.sdk, "")).json["data"]) == 1


def test_mcp_create_key_takes_an_idempotency_key(app, client, org):
    def call(arguments: dict) -> dict:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "create_key", "arguments": arguments},
        }
        headers = {"Accept": "application/json, text/event-stream"}
        headers["Authorization"] = f"Bearer {org.sdk}"
        response = client.post("/mcp", json=message, headers=headers)
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.json["result"]

    try:
        key = str(uuid.uuid4())
        before = total(client, org)
        first = call(BODY | {"idempotency_key": key})
        again = call(BODY | {"idempotency_key": key})
        assert "isError" not in first or not first["isError"], first
        assert again["structuredContent"] == first["structuredContent"]
        assert keyformat.is_full_key(again["structuredContent"]["key"])
        assert total(client, org) == before + 1
        other = call(BODY | {"name": "other", "idempotency_key": key})
        assert other["isError"] is True
        assert json.loads(other["content"][0]["text"])["code"] == "idempotency_key_reused"
    finally:
        runtime = app.extensions.pop("mcp", None)
        if runtime is not None:
            runtime.close()
