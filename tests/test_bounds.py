"""Never more than the caller (docs/design.md, "Promises kept by default"), in rate, and for a key
that changes itself: a caller with a `rate_limit` gives no faster one and never none, a key
it makes or rotates without naming one takes the caller's, and no key lifts or loosens its
own bounds (scopes, place, time, rate), by update or rotation, over REST or MCP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain import keyformat
from app.http.errors import ApiError
from app.keys import schemas, service
from app.storage import queries
from tests.test_mcp import call, closed_mcp, refused  # noqa: F401 (closed_mcp: autouse)

OWN = {"requests": 100, "seconds": 60}


def later(**delta: float) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat().replace("+00:00", "Z")


def create(client, key: str, **body):
    body = {"name": "b", "kind": "custom", "scopes": ["monitor:read"]} | body
    body = {field: value for field, value in body.items() if field != "scopes" or value}
    return client.post("/api/keys", json=body, auth=(key, ""))


def update(client, key: str, target: str, **body):
    return client.put(f"/api/keys/{target}", json=body, auth=(key, ""))


def rotate(client, key: str, target: str, **body):
    return client.post(f"/api/keys/{target}/rotate", json=body, auth=(key, ""))


def read(client, org, key: str) -> dict:
    return client.get(f"/api/keys/{key}", auth=(org.sdk, "")).json


def assert_exceeds(response, field: str) -> dict:
    assert response.status_code == 403, response.get_data(as_text=True)
    body = response.json
    assert response.mimetype == "application/problem+json"
    assert body["code"] == "exceeds_caller"
    assert list(body["errors"]) == [field], body
    return body


@pytest.fixture
def limited(client, org) -> str:
    """A managing key limited to 100 uses per 60 seconds."""
    made = create(client, org.sdk, kind="sdk_integration", scopes=None, rate_limit=OWN)
    assert made.status_code == 201, made.json
    return made.json["key"]


# --- never more than the caller, in rate ----------------------------------------------------


@pytest.mark.parametrize(
    "rate_limit",
    [
        None,
        {"requests": 101, "seconds": 60},
        {"requests": 101, "seconds": 86400},  # slower, but more uses at once
        {"requests": 100, "seconds": 59},  # as many, but faster
        {"requests": 2, "seconds": 1},  # fewer, but faster
    ],
    ids=["none", "more", "more-slower", "faster", "fewer-faster"],
)
def test_a_limited_caller_gives_no_more_rate_than_it_has(
    client, org, limited, make_key, rate_limit
):
    body = assert_exceeds(create(client, limited, rate_limit=rate_limit), "rate_limit")
    assert "100 uses per 60 seconds" in body["detail"]
    target = make_key()
    before = read(client, org, target)
    assert_exceeds(update(client, limited, target, rate_limit=rate_limit), "rate_limit")
    assert read(client, org, target) == before
    listed = client.get("/api/keys", auth=(org.sdk, "")).json
    assert listed["total_count"] == 4  # the two starting keys, `limited` and `target`


@pytest.mark.parametrize(
    "rate_limit",
    [
        OWN,
        {"requests": 50, "seconds": 30},
        {"requests": 100, "seconds": 3600},
        {"requests": 1, "seconds": 1},
    ],
    ids=["same", "same-rate", "slower", "one-per-second"],
)
def test_a_limited_caller_may_give_as_much_or_less(client, limited, make_key, rate_limit):
    made = create(client, limited, rate_limit=rate_limit)
    assert made.status_code == 201, made.json
    assert made.json["rate_limit"] == rate_limit
    updated = update(client, limited, make_key(), rate_limit=rate_limit)
    assert updated.status_code == 200, updated.json
    assert updated.json["rate_limit"] == rate_limit


def test_a_key_a_limited_caller_makes_without_a_limit_takes_the_callers(client, limited):
    made = create(client, limited)
    assert made.status_code == 201, made.json
    assert made.json["rate_limit"] == OWN


def test_an_update_by_a_limited_caller_that_names_no_limit_changes_none(client, limited, make_key):
    updated = update(client, limited, make_key(), name="renamed")
    assert updated.status_code == 200, updated.json
    assert updated.json["rate_limit"] is None


def test_a_rotation_by_a_limited_caller_takes_its_limit_unless_the_keys_is_within(
    client, org, limited
):
    unlimited = create(client, org.sdk).json["key"]
    faster = create(client, org.sdk, rate_limit={"requests": 10, "seconds": 1}).json["key"]
    slower = create(client, org.sdk, rate_limit={"requests": 10, "seconds": 60}).json["key"]
    assert rotate(client, limited, unlimited).json["rate_limit"] == OWN
    assert rotate(client, limited, faster).json["rate_limit"] == OWN
    assert rotate(client, limited, slower).json["rate_limit"] == {"requests": 10, "seconds": 60}
    # A caller without a limit copies the key's, none included.
    again = create(client, org.sdk).json["key"]
    assert rotate(client, org.sdk, again).json["rate_limit"] is None


# --- no key loosens its own bounds ----------------------------------------------------------


@pytest.mark.parametrize(
    "rate_limit",
    [None, {"requests": 101, "seconds": 60}, {"requests": 100, "seconds": 30}],
    ids=["none", "more", "faster"],
)
def test_a_limited_key_cannot_lift_or_loosen_its_own_limit(client, org, limited, rate_limit):
    before = read(client, org, limited)
    assert_exceeds(update(client, limited, limited, rate_limit=rate_limit), "rate_limit")
    after = read(client, org, limited)
    assert (after["rate_limit"], after["updated"]) == (OWN, before["updated"])


def test_a_limited_key_may_tighten_its_own_limit_and_not_undo_it(client, org, limited):
    tighter = {"requests": 10, "seconds": 60}
    tightened = update(client, limited, limited, rate_limit=tighter)
    assert tightened.status_code == 200, tightened.json
    assert tightened.json["rate_limit"] == tighter
    assert_exceeds(update(client, limited, limited, rate_limit=OWN), "rate_limit")
    assert read(client, org, limited)["rate_limit"] == tighter


def test_a_fenced_key_cannot_loosen_its_own_place_time_or_scopes(client, org):
    client.environ_base["REMOTE_ADDR"] = "10.1.2.3"
    made = create(
        client,
        org.sdk,
        scopes=["monitor:read", "monitor:write"],
        allowed_ips=["10.0.0.0/8"],
        expires_at=later(days=1),
    )
    fenced = made.json["key"]
    for body, field in (
        ({"allowed_ips": []}, "allowed_ips"),
        ({"allowed_ips": ["0.0.0.0/0"]}, "allowed_ips"),
        ({"expires_at": None}, "expires_at"),
        ({"expires_at": later(days=2)}, "expires_at"),
    ):
        assert_exceeds(update(client, fenced, fenced, **body), field)
    widened = update(client, fenced, fenced, scopes=["monitor:read", "site:read"])
    assert widened.status_code == 403 and widened.json["code"] == "scope_exceeds_caller"
    # A rotation of itself takes its own bounds, and names no later end.
    assert_exceeds(rotate(client, fenced, fenced, expires_at=later(days=2)), "expires_at")
    successor = rotate(client, fenced, fenced)
    assert successor.status_code == 201, successor.json
    assert successor.json["allowed_ips"] == ["10.0.0.0/8"]
    assert successor.json["expires_at"] == made.json["expires_at"]


def test_a_rotation_of_a_limited_key_by_itself_keeps_its_limit(client, limited):
    successor = rotate(client, limited, limited, grace_seconds=60)
    assert successor.status_code == 201, successor.json
    assert successor.json["rate_limit"] == OWN


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"rate_limit": {"requests": 100, "seconds": 60}}, "exceeds_caller"),
        ({"scopes": ["monitor:read", "site:read"]}, "scope_exceeds_caller"),
    ],
    ids=["rate_limit", "scopes"],
)
def test_a_request_made_before_its_key_was_narrowed_cannot_widen_it_back(
    app, client, org, body, code
):
    """A key's change of itself is judged by what it holds when the change is written,
    not by what it held when its request was authenticated."""
    key = create(client, org.sdk, scopes=["monitor:read", "site:read"], rate_limit=OWN).json["key"]
    with app.app_context():
        caller = queries.holder(keyformat.digest(key)).caller  # authenticated now
    narrowed = update(
        client, org.sdk, key, scopes=["monitor:read"], rate_limit={"requests": 10, "seconds": 60}
    )
    assert narrowed.status_code == 200, narrowed.json
    data = schemas.update_key.load(body)
    with app.app_context(), pytest.raises(ApiError) as refusal:
        service.update_key(caller, service.find_key(caller, key), data)
    assert refusal.value.problem_code == code
    assert read(client, org, key)["rate_limit"] == {"requests": 10, "seconds": 60}
    assert read(client, org, key)["scopes"] == ["monitor:read"]


# --- MCP: the same service functions --------------------------------------------------------


def test_mcp_tools_apply_the_callers_rate(client, org, limited, make_key):
    made = call(
        client,
        limited,
        "create_key",
        {"name": "m", "kind": "custom", "scopes": ["monitor:read"]},
    )
    assert made["structuredContent"]["rate_limit"] == OWN, made
    faster = {"requests": 100, "seconds": 1}
    refusal = refused(
        call(
            client,
            limited,
            "create_key",
            {"name": "m", "kind": "custom", "scopes": ["monitor:read"], "rate_limit": faster},
        )
    )
    assert (refusal["status"], refusal["code"]) == (403, "exceeds_caller")
    assert list(refusal["errors"]) == ["rate_limit"]
    itself = refused(call(client, limited, "update_key", {"key": limited, "rate_limit": None}))
    assert (itself["code"], list(itself["errors"])) == ("exceeds_caller", ["rate_limit"])
    rotated = call(client, limited, "rotate_key", {"key": make_key()})
    assert rotated["structuredContent"]["rate_limit"] == OWN, rotated
    assert read(client, org, limited)["rate_limit"] == OWN
