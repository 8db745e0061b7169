"""`last_used` (docs/design.md, "Authentication"): set when a key authenticates a request, whatever
the outcome; the first use at once, later uses at most once per LAST_USED_RESOLUTION seconds."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from sqlalchemy.engine import make_url

from app.domain.keyformat import identifier_of
from app.keys import operator
from app.storage.database import upgrade
from tests.databases import _administer, needs_postgresql


def now() -> datetime:
    return datetime.now(UTC)


def parse(timestamp: str) -> datetime:
    assert timestamp.endswith("Z"), timestamp
    return datetime.fromisoformat(timestamp)


def read(client, reader: str, key: str) -> dict:
    """The key object of `key` as `reader` sees it."""
    response = client.get(f"/api/keys/{identifier_of(key)}", auth=(reader, ""))
    assert response.status_code == 200, response.json
    return response.json


def read_self(client, key: str) -> tuple[dict, datetime, datetime]:
    """A key reads itself: its object and the times just before and after the request."""
    before = now()
    response = client.get(f"/api/keys/{identifier_of(key)}", auth=(key, ""))
    after = now()
    assert response.status_code == 200, response.json
    return response.json, before, after


def test_never_used_key_shows_last_used_null(client, org, make_key):
    unused = make_key()
    assert read(client, org.sdk, unused)["last_used"] is None
    listing = client.get("/api/keys", auth=(org.sdk, "")).json["data"]
    shown = {item["key"]: item for item in listing}
    assert shown[identifier_of(unused) + "..."]["last_used"] is None
    assert shown[identifier_of(org.telemetry) + "..."]["last_used"] is None


def test_created_key_shows_last_used_null(client, org):
    body = {"name": "fresh", "kind": "custom", "scopes": ["site:read"]}
    created = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert created.status_code == 201, created.json
    assert created.json["last_used"] is None
    assert read(client, org.sdk, created.json["key"])["last_used"] is None


def test_reading_a_key_is_not_using_it(client, org, make_key):
    other = make_key()
    read(client, org.sdk, other)
    read(client, org.sdk, other)
    assert read(client, org.sdk, other)["last_used"] is None


def test_first_use_is_recorded_at_once_so_a_key_reading_itself_sees_this_request(client, make_key):
    key = make_key()
    body, before, after = read_self(client, key)
    assert body["last_used"] is not None
    assert before <= parse(body["last_used"]) <= after


def test_first_use_is_visible_in_the_callers_own_list_entry(client, make_key):
    key = make_key()
    before = now()
    listing = client.get("/api/keys", auth=(key, ""))
    after = now()
    assert listing.status_code == 200, listing.json
    own = next(item for item in listing.json["data"] if item["key"] == identifier_of(key) + "...")
    assert before <= parse(own["last_used"]) <= after


def test_use_is_recorded_when_the_request_ends_in_403_for_a_telemetry_key(client, org):
    before = now()
    refused = client.get("/api/keys", auth=(org.telemetry, ""))
    after = now()
    assert refused.status_code == 403
    last_used = read(client, org.sdk, org.telemetry)["last_used"]
    assert last_used is not None
    assert before <= parse(last_used) <= after


NEW_KEY = {"name": "n", "kind": "custom", "scopes": ["monitor:read"]}
# Requests by a custom key holding only monitor:read that end in a refusal.
REFUSED = {
    "422 bad page": (dict(method="GET", path="/api/keys?page=0"), 422),
    "422 bad body": (dict(method="POST", path="/api/keys", json={"name": ""}), 422),
    "404 unknown key": (dict(method="GET", path="/api/keys/ak_000000000000"), 404),
    "415 media type": (dict(method="POST", path="/api/keys", data="x"), 415),
    "400 bad json": (
        dict(method="POST", path="/api/keys", data="{", content_type="application/json"),
        400,
    ),
    "403 scope exceeds": (
        dict(method="POST", path="/api/keys", json=NEW_KEY | {"scopes": ["site:write"]}),
        403,
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_use_is_recorded_whatever_the_outcome(client, org, make_key, case):
    key = make_key(scopes=["monitor:read"])
    request, status = REFUSED[case]
    before = now()
    response = client.open(auth=(key, ""), **request)
    after = now()
    assert response.status_code == status, response.get_data(as_text=True)
    last_used = read(client, org.sdk, key)["last_used"]
    assert last_used is not None
    assert before <= parse(last_used) <= after


def test_default_resolution_keeps_last_used_for_a_second_use_within_60_seconds(
    client, org, make_key
):
    key = make_key()
    first, _, _ = read_self(client, key)
    second, _, _ = read_self(client, key)
    assert client.get("/api/keys", auth=(key, "")).status_code == 200
    assert second["last_used"] == first["last_used"]
    assert read(client, org.sdk, key)["last_used"] == first["last_used"]


def test_use_is_not_an_update(client, org, make_key):
    key = make_key()
    for _ in range(3):
        body, _, _ = read_self(client, key)
    assert body["last_used"] is not None
    assert body["updated"] == body["created"]


class TestResolutionZero:
    """With LAST_USED_RESOLUTION=0 every use is written."""

    @pytest.fixture
    def app_config(self) -> dict:
        return {"LAST_USED_RESOLUTION": 0}

    def test_every_use_updates_last_used(self, client, make_key):
        key = make_key()
        first, before_first, after_first = read_self(client, key)
        second, before_second, after_second = read_self(client, key)
        assert before_first <= parse(first["last_used"]) <= after_first
        assert before_second <= parse(second["last_used"]) <= after_second
        assert parse(second["last_used"]) > parse(first["last_used"])

    def test_every_use_by_a_telemetry_key_updates_last_used(self, client, org):
        seen = []
        for _ in range(2):
            before = now()
            assert client.get("/api/keys", auth=(org.telemetry, "")).status_code == 403
            after = now()
            last_used = parse(read(client, org.sdk, org.telemetry)["last_used"])
            assert before <= last_used <= after
            seen.append(last_used)
        assert seen[1] > seen[0]

    def test_use_is_not_an_update(self, client, make_key):
        key = make_key()
        first, _, _ = read_self(client, key)
        second, _, _ = read_self(client, key)
        assert second["last_used"] != first["last_used"]
        assert second["updated"] == second["created"] == first["created"]


class TestResolutionOneSecond:
    """With LAST_USED_RESOLUTION=1 a use is written again once the second has passed."""

    @pytest.fixture
    def app_config(self) -> dict:
        return {"LAST_USED_RESOLUTION": 1}

    def test_a_use_after_the_window_is_written(self, client, make_key):
        key = make_key()
        first, _, _ = read_self(client, key)
        time.sleep(1.05)
        later, before, after = read_self(client, key)
        assert before <= parse(later["last_used"]) <= after
        assert parse(later["last_used"]) > parse(first["last_used"])


@needs_postgresql
def test_first_use_is_seen_at_once_where_the_server_defaults_to_repeatable_read(
    make_app, new_database
):
    """Reads and the last_used write run on two connections: under a REPEATABLE READ
    default a read's snapshot could miss the write; reads run in autocommit, each seeing
    every commit before it."""
    url = new_database()
    _administer(
        f'ALTER DATABASE "{make_url(url).database}" '
        "SET default_transaction_isolation = 'repeatable read'"
    )
    app = make_app(SQLALCHEMY_DATABASE_URI=url)
    upgrade(app)
    with app.app_context():
        _, keys = operator.create_organization("isolation")
    sdk = next(full_key for key, full_key in keys if key.kind == "sdk_integration")
    body, before, after = read_self(app.test_client(), sdk)
    assert body["last_used"] is not None
    assert before.replace(microsecond=0) <= parse(body["last_used"]) <= after
