"""Expiry, lineage, rotation and the list filters (docs/design.md)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.keyformat import identifier_of

HOUR = timedelta(hours=1)


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def future(delta: timedelta = HOUR) -> str:
    return stamp(datetime.now(UTC) + delta)


def create(client, auth_key: str, **body):
    body = {"name": "made", "kind": "custom", "scopes": ["monitor:read"], **body}
    return client.post("/api/keys", json=body, auth=(auth_key, ""))


def expire_now(sql, full_key: str, seconds_ago: float = 1) -> None:
    moment = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=seconds_ago)
    sql(
        "UPDATE api_keys SET expires_at = :moment WHERE identifier = :identifier",
        moment=moment,
        identifier=identifier_of(full_key),
    )


# --- expires_at and created_by --------------------------------------------------------------


def test_a_key_made_by_a_request_names_its_maker_and_expiry(client, org):
    expires = datetime.now(UTC) + HOUR
    made = create(client, org.sdk, expires_at=stamp(expires))
    assert made.status_code == 201, made.json
    assert made.json["created_by"] == identifier_of(org.sdk) + "..."
    shown = datetime.fromisoformat(made.json["expires_at"])
    assert abs(shown - expires) < timedelta(microseconds=2)
    read = client.get(made.headers["Location"], auth=(org.sdk, "")).json
    assert (read["expires_at"], read["created_by"]) == (
        made.json["expires_at"],
        made.json["created_by"],
    )


def test_operator_keys_have_no_maker_and_no_expiry(client, org):
    listing = client.get("/api/keys", auth=(org.sdk, "")).json
    assert {(k["created_by"], k["expires_at"]) for k in listing["data"]} == {(None, None)}


def test_an_offset_is_turned_to_utc(client, org):
    made = create(client, org.sdk, expires_at="2999-01-01T02:00:00+02:00")
    assert made.json["expires_at"] == "2999-01-01T00:00:00.000000Z"


@pytest.mark.parametrize(
    "value",
    [
        "2000-01-01T00:00:00Z",  # past
        "2999-01-01T00:00:00",  # no offset
        "0001-01-01T00:00:00+00:01",  # before the year 1 in UTC
        "9999-12-31T23:59:59-00:01",  # after the year 9999 in UTC
        "tomorrow",
        12,
        True,
        "",
    ],
)
def test_bad_expiry_is_422_naming_expires_at_and_writes_nothing(client, org, sql, value):
    before = sql("SELECT count(*) FROM api_keys")
    response = create(client, org.sdk, expires_at=value)
    assert response.status_code == 422, response.json
    assert "expires_at" in response.json["errors"]
    assert sql("SELECT count(*) FROM api_keys") == before


def test_update_sets_and_clears_expiry_even_of_an_immutable_key(client, org, make_key):
    telemetry = identifier_of(make_key(kind="telemetry"))
    url = f"/api/keys/{telemetry}"
    set_ = client.put(url, json={"expires_at": future()}, auth=(org.sdk, ""))
    assert set_.status_code == 200, set_.json
    assert set_.json["expires_at"] is not None
    assert set_.json["updated"] > set_.json["created"]
    cleared = client.put(url, json={"expires_at": None}, auth=(org.sdk, ""))
    assert (cleared.status_code, cleared.json["expires_at"]) == (200, None)


def test_changing_expiry_needs_power_over_the_key(client, make_key):
    weak = make_key(scopes=["monitor:read"])
    strong = identifier_of(make_key(scopes=["monitor:read", "site:read"]))
    response = client.put(f"/api/keys/{strong}", json={"expires_at": future()}, auth=(weak, ""))
    assert (response.status_code, response.json["code"]) == (403, "forbidden")


# --- an expired key -------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["basic", "bearer"])
def test_an_expired_key_is_401_expired_key(client, org, make_key, sql, scheme):
    key = make_key(scopes=["monitor:read"])
    assert client.get("/api/keys", auth=(key, "")).status_code == 200
    expire_now(sql, key)
    headers = {"Authorization": f"Bearer {key}"} if scheme == "bearer" else {}
    auth = (key, "") if scheme == "basic" else None
    response = client.get("/api/keys", auth=auth, headers=headers)
    assert response.status_code == 401
    assert response.json["code"] == "expired_key"
    assert response.headers["WWW-Authenticate"] == 'Basic realm="api"'
    assert key not in response.get_data(as_text=True)


def test_a_key_expires_at_the_instant(client, org):
    made = create(client, org.sdk, expires_at=future(timedelta(seconds=1.5))).json
    assert client.get("/api/keys", auth=(made["key"], "")).status_code == 200
    time.sleep(1.6)
    assert client.get("/api/keys", auth=(made["key"], "")).json["code"] == "expired_key"


def test_an_expired_key_stays_listed_readable_and_updatable(client, org, make_key, sql):
    key = make_key(name="stale")
    expire_now(sql, key)
    identifier = identifier_of(key)
    got = client.get(f"/api/keys/{identifier}", auth=(org.sdk, ""))
    assert got.status_code == 200 and got.json["expires_at"] is not None
    renamed = client.put(f"/api/keys/{identifier}", json={"name": "older"}, auth=(org.sdk, ""))
    assert renamed.status_code == 200
    revived = client.put(f"/api/keys/{identifier}", json={"expires_at": None}, auth=(org.sdk, ""))
    assert revived.status_code == 200
    assert client.get("/api/keys", auth=(key, "")).status_code == 200


def test_an_expired_key_records_no_use(client, make_key, sql):
    key = make_key()
    expire_now(sql, key)
    client.get("/api/keys", auth=(key, ""))
    assert sql("SELECT last_used FROM api_keys WHERE identifier = :i", i=identifier_of(key)) == [
        (None,)
    ]


# --- the list filters -----------------------------------------------------------------------


def listing(client, key: str, query: str) -> dict:
    response = client.get(f"/api/keys?{query}", auth=(key, ""))
    assert response.status_code == 200, response.json
    return response.json


def test_state_filters_and_counts(client, org, make_key, sql):
    stale = make_key(name="stale")
    expire_now(sql, stale)
    make_key(name="fresh")
    expired = listing(client, org.sdk, "state=expired")
    assert [k["name"] for k in expired["data"]] == ["stale"]
    assert expired["total_count"] == 1
    active = listing(client, org.sdk, "state=active&page_size=2&page=2")
    assert active["total_count"] == 3  # two starting keys and "fresh"
    assert [k["name"] for k in active["data"]] == ["fresh"]
    assert listing(client, org.sdk, "state=active&kind=custom")["total_count"] == 1


def test_unused_since_lists_keys_never_used_or_used_before(client, org, make_key, sql):
    never = make_key(name="never")
    used = make_key(name="used")
    client.get("/api/keys", auth=(used, ""))
    long_ago = make_key(name="long ago")
    sql(
        "UPDATE api_keys SET last_used = :t WHERE identifier = :i",
        t=datetime(2020, 1, 1),
        i=identifier_of(long_ago),
    )
    body = listing(client, org.sdk, "unused_since=2025-01-01T00:00:00Z&kind=custom")
    assert {k["name"] for k in body["data"]} == {"never", "long ago"}
    assert body["total_count"] == 2
    assert never  # made, never used


@pytest.mark.parametrize(
    "query",
    ["state=dead", "state=", "unused_since=yesterday", "unused_since=2025-01-01T00:00:00"],
)
def test_bad_filters_are_422(client, org, query):
    response = client.get(f"/api/keys?{query}", auth=(org.sdk, ""))
    assert response.status_code == 422
    assert set(response.json["errors"]) == {query.partition("=")[0]}


# --- rotation -------------------------------------------------------------------------------


def rotate(client, caller: str, reference: str, body=None, **kwargs):
    if body is not None:
        kwargs["json"] = body
    return client.post(f"/api/keys/{reference}/rotate", auth=(caller, ""), **kwargs)


def test_rotate_without_body_replaces_the_key_at_once(client, org, make_key):
    old = make_key(name="ci", scopes=["monitor:read", "site:read"])
    response = rotate(client, org.sdk, identifier_of(old))
    assert response.status_code == 201, response.json
    new = response.json
    assert (new["name"], new["kind"], new["scopes"]) == (
        "ci",
        "custom",
        ["monitor:read", "site:read"],
    )
    assert new["created_by"] == identifier_of(org.sdk) + "..."
    assert new["expires_at"] is None
    assert response.headers["Location"] == f"/api/keys/{identifier_of(new['key'])}"
    assert client.get("/api/keys", auth=(old, "")).status_code == 401
    assert client.get("/api/keys", auth=(new["key"], "")).status_code == 200


def test_rotate_with_grace_keeps_the_old_key_working_until_then(client, org, make_key, sql):
    old = make_key()
    response = rotate(client, org.sdk, identifier_of(old), {"grace_seconds": 3600})
    assert response.status_code == 201, response.json
    assert client.get("/api/keys", auth=(old, "")).status_code == 200
    old_key = client.get(f"/api/keys/{identifier_of(old)}", auth=(org.sdk, "")).json
    until = datetime.fromisoformat(old_key["expires_at"])
    assert timedelta(minutes=59) < until - datetime.now(UTC) <= HOUR


def test_rotate_never_extends_an_earlier_expiry(client, org, make_key, sql):
    soon = future(timedelta(minutes=5))
    old = identifier_of(make_key())
    client.put(f"/api/keys/{old}", json={"expires_at": soon}, auth=(org.sdk, ""))
    before = client.get(f"/api/keys/{old}", auth=(org.sdk, "")).json["expires_at"]
    rotate(client, org.sdk, old, {"grace_seconds": 3600})
    assert client.get(f"/api/keys/{old}", auth=(org.sdk, "")).json["expires_at"] == before


def test_rotate_sets_the_replacements_expiry(client, org, make_key):
    old = identifier_of(make_key())
    response = rotate(client, org.sdk, old, {"expires_at": "2999-01-01T00:00:00Z"})
    assert response.json["expires_at"] == "2999-01-01T00:00:00.000000Z"


def test_rotate_keeps_a_future_expiry_by_default(client, org):
    """A time-limited key never becomes permanent by a routine rotation (section 9): with no
    body, and with a body that names no expiry, the successor ends when the old key did,
    whatever grace the old key gets."""
    ends = future(2 * HOUR)
    for body in (None, {"grace_seconds": 3600}):
        old = create(client, org.sdk, expires_at=ends).json
        response = rotate(client, org.sdk, identifier_of(old["key"]), body)
        assert response.status_code == 201, response.json
        assert response.json["expires_at"] == old["expires_at"]
        successor = client.get(response.headers["Location"], auth=(org.sdk, "")).json
        assert successor["expires_at"] == old["expires_at"]


def test_rotate_of_an_expired_key_gives_a_successor_without_expiry(client, org, make_key, sql):
    old = make_key()
    expire_now(sql, old)
    response = rotate(client, org.sdk, identifier_of(old))
    assert response.status_code == 201, response.json
    assert response.json["expires_at"] is None


def test_rotate_with_expiry_null_gives_a_successor_without_expiry(client, org):
    """An explicit null is the body's value: no expiry, even when the old key had one."""
    old = create(client, org.sdk, expires_at=future()).json["key"]
    response = rotate(client, org.sdk, identifier_of(old), {"expires_at": None})
    assert response.status_code == 201, response.json
    assert response.json["expires_at"] is None


def test_rotate_works_for_immutable_and_expired_keys(client, org, make_key, sql):
    telemetry = make_key(kind="telemetry")
    expire_now(sql, telemetry)
    response = rotate(client, org.sdk, identifier_of(telemetry))
    assert response.status_code == 201
    assert (response.json["kind"], response.json["scopes"]) == ("telemetry", ["monitor:telemetry"])


def test_rotate_needs_power_over_the_key(client, org, make_key, sql):
    weak = make_key(scopes=["monitor:read"])
    before = sql("SELECT count(*) FROM api_keys")
    response = rotate(client, weak, identifier_of(org.sdk))
    assert (response.status_code, response.json["code"]) == (403, "forbidden")
    assert sql("SELECT count(*) FROM api_keys") == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"grace_seconds": -1}, "grace_seconds"),
        ({"grace_seconds": 2592001}, "grace_seconds"),
        ({"grace_seconds": "60"}, "grace_seconds"),
        ({"grace_seconds": 1.5}, "grace_seconds"),
        ({"expires_at": "2000-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "x"}, "name"),
    ],
)
def test_bad_rotate_bodies_are_422_and_change_nothing(client, org, make_key, sql, body, field):
    old = make_key()
    before = sql("SELECT count(*) FROM api_keys")
    response = rotate(client, org.sdk, identifier_of(old), body)
    assert response.status_code == 422, response.json
    assert field in response.json["errors"]
    assert sql("SELECT count(*) FROM api_keys") == before
    assert client.get("/api/keys", auth=(old, "")).status_code == 200


def test_rotate_with_a_body_of_another_media_type_is_415(client, org, make_key):
    old = identifier_of(make_key())
    response = client.post(
        f"/api/keys/{old}/rotate",
        data="grace_seconds=5",
        auth=(org.sdk, ""),
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 415


def test_rotate_of_an_unknown_key_is_404(client, org):
    assert rotate(client, org.sdk, "ak_unknownkey0").status_code == 404


@pytest.mark.parametrize("grace", [0, 60])
def test_two_concurrent_rotations_leave_a_consistent_state(app, org, make_key, sql, grace):
    old = make_key(name="raced")
    answers: list[int] = []
    barrier = threading.Barrier(2)

    def one() -> None:
        client = app.test_client()
        barrier.wait()
        answers.append(
            rotate(client, org.sdk, identifier_of(old), {"grace_seconds": grace}).status_code
        )

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    replacements = sql("SELECT count(*) FROM api_keys WHERE name = 'raced'")[0][0] - (grace > 0)
    rotated = sql("SELECT count(*) FROM audit_events WHERE action = 'key.rotated'")[0][0]
    # The second finds the key gone (grace 0) or replaced (409 already_rotated).
    assert sorted(answers) == [201, 404 if grace == 0 else 409], answers
    assert rotated == answers.count(201)  # every change recorded
    if grace == 0:
        assert answers.count(201) == 1 and replacements == 1  # never two live replacements
        assert sql("SELECT count(*) FROM api_keys WHERE identifier = :i", i=identifier_of(old)) == [
            (0,)
        ]
    else:
        assert replacements == 1


def test_a_filtered_page_far_past_the_end_is_empty(client, org):
    body = listing(client, org.sdk, "state=active&page=999999999999999999&page_size=200")
    assert (body["data"], body["total_count"]) == ([], 2)
