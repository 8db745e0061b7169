"""Quotas (docs/design.md, "Quotas"): so many allowed uses of a key per UTC calendar period,
at every door together, refused with 429 quota_exceeded past them; counted with its rate
limit all or nothing; granted, audited, kept by a rotation's successor and by a change of
the quota; renewed when the period ends (a clock the test moves)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from app.access import uses
from app.domain import periods
from app.quotas import service as quotas
from tests.test_mcp import call, listed, refused, rpc
from tests.test_policy import create, events, rotate, update

DAY = {"requests": 3, "period": "day"}


def key_with(client, org, **body) -> dict:
    answer = create(client, org.sdk, **body)
    assert answer.status_code == 201, answer.json
    return answer.json


def use(client, key: str, door: str = "rest"):
    """A use of `key`: at REST, a create (managing keys spends no quota, making them does:
    201), else a check at forward auth (204)."""
    if door == "rest":
        body = {"name": "use", "kind": "custom", "scopes": ["monitor:read"]}
        return client.post("/api/keys", json=body, auth=(key, ""))
    return client.get("/api/forward-auth", auth=(key, ""))


def read(client, org, key: str) -> dict:
    return client.get(f"/api/keys/{key[:15]}", auth=(org.sdk, "")).json


# What a person reads: a quota renewed by its period, and a lifetime's, never renewed.
RENEWED = (
    "This API key has used up its quota for this period: Retry-After says when the next "
    "period renews it."
)
NEVER_RENEWED = (
    "This API key has used up its lifetime quota, which is never renewed: ask the key's owner "
    "for more uses (POST /api/keys/<key>/quota)."
)


def assert_quota_exceeded(answer, retry_after: bool = True) -> None:
    """429 quota_exceeded; a period's with Retry-After and the sentence that points at it, a
    lifetime's without either, saying who can give it more."""
    assert answer.status_code == 429, answer.json
    assert answer.mimetype == "application/problem+json"
    assert answer.json["code"] == "quota_exceeded"
    assert answer.json["detail"] == (RENEWED if retry_after else NEVER_RENEWED)
    assert answer.headers["Quota-Remaining"] == "0"
    assert ("Retry-After" in answer.headers) is retry_after
    assert ("Quota-Reset" in answer.headers) is retry_after
    if retry_after:
        assert 1 <= int(answer.headers["Retry-After"]) <= 86_400
        assert answer.headers["Retry-After"] == answer.headers["Quota-Reset"]


def test_a_key_has_no_quota_by_default(client, org):
    made = key_with(client, org)
    assert (made["quota"], made["quota_remaining"]) == (None, None)
    answer = use(client, made["key"])
    assert "Quota-Remaining" not in answer.headers


def test_uses_at_every_door_spend_the_quota_then_429(client, org):
    made = key_with(client, org, quota=DAY)
    assert (made["quota"], made["quota_remaining"]) == (DAY, 3)
    key = made["key"]
    first, second = use(client, key), use(client, key, "forward_auth")
    assert (first.status_code, second.status_code) == (201, 204)
    assert [first.headers["Quota-Remaining"], second.headers["Quota-Remaining"]] == ["2", "1"]
    assert 1 <= int(first.headers["Quota-Reset"]) <= 86_400
    assert read(client, org, key)["quota_remaining"] == 1
    assert use(client, key, "forward_auth").status_code == 204
    for door in ("rest", "forward_auth"):
        assert_quota_exceeded(use(client, key, door))
    assert read(client, org, key)["quota_remaining"] == 0


def test_a_lifetime_quota_says_no_reset_and_who_can_give_more(client, org):
    key = key_with(client, org, quota={"requests": 1, "period": "lifetime"})["key"]
    allowed = use(client, key)
    assert allowed.headers["Quota-Remaining"] == "0"
    assert "Quota-Reset" not in allowed.headers
    for door in ("rest", "forward_auth"):
        assert_quota_exceeded(use(client, key, door), retry_after=False)
    # What its detail points at gives it more, and the key is let through again.
    granted = client.post(f"/api/keys/{key[:15]}/quota", json={"add": 1}, auth=(org.sdk, ""))
    assert granted.status_code == 200, granted.json
    assert use(client, key).status_code == 201


def test_introspection_shows_what_is_left_then_quota_exceeded(client, org):
    key = key_with(client, org, quota={"requests": 1, "period": "week"})["key"]
    active = client.post("/api/introspect", data={"token": key}, auth=(org.sdk, "")).json
    assert (active["active"], active["quota_remaining"]) == (True, 0)
    inactive = client.post("/api/introspect", data={"token": key}, auth=(org.sdk, "")).json
    assert inactive == {"active": False, "code": "quota_exceeded"}


def test_a_use_the_rate_limit_refuses_spends_nothing_of_the_quota(client, org):
    rate = {"requests": 2, "seconds": 60}
    key = key_with(client, org, quota={"requests": 10, "period": "day"}, rate_limit=rate)["key"]
    assert [use(client, key).status_code for _ in range(4)] == [201, 201, 429, 429]
    assert read(client, org, key)["quota_remaining"] == 8


def test_a_use_the_quota_refuses_spends_nothing_of_the_rate_limit(client, org):
    rate = {"requests": 5, "seconds": 60}
    key = key_with(client, org, quota={"requests": 2, "period": "day"}, rate_limit=rate)["key"]
    assert [use(client, key).status_code for _ in range(4)] == [201, 201, 429, 429]
    grant = client.post(f"/api/keys/{key[:15]}/quota", json={"add": 1}, auth=(org.sdk, ""))
    assert grant.status_code == 200, grant.json
    answer = use(client, key)
    assert answer.status_code == 201
    assert answer.headers["RateLimit"] == '"key";r=2;t=' + answer.headers["RateLimit"][12:]


def test_grants_add_or_set_what_is_left_and_are_audited(client, org):
    key = key_with(client, org, quota=DAY)["key"]
    use(client, key)
    path = f"/api/keys/{key[:15]}/quota"
    added = client.post(path, json={"add": 5}, auth=(org.sdk, ""))
    assert (added.status_code, added.json["quota_remaining"]) == (200, 7)
    assert read(client, org, key)["quota_remaining"] == 7
    set_ = client.post(path, json={"set_remaining": 1}, auth=(org.sdk, ""))
    assert set_.json["quota_remaining"] == 1
    assert use(client, key).status_code == 201
    assert_quota_exceeded(use(client, key))
    recorded = events(client, org.sdk, "key.quota")
    assert [event["details"] for event in recorded] == [
        {"set_remaining": 1, "remaining": [7, 1]},
        {"add": 5, "remaining": [2, 7]},
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "_schema"),
        ({"add": 1, "set_remaining": 1}, "_schema"),
        ({"add": 0}, "add"),
        ({"add": "1"}, "add"),
        ({"set_remaining": -1}, "set_remaining"),
        ({"more": 1}, "more"),
    ],
)
def test_a_bad_grant_is_422(client, org, body, field):
    key = key_with(client, org, quota=DAY)["key"]
    answer = client.post(f"/api/keys/{key[:15]}/quota", json=body, auth=(org.sdk, ""))
    assert answer.status_code == 422, answer.json
    assert field in answer.json["errors"]


def test_a_grant_needs_a_quota_and_power_over_the_key(client, org, make_key, other_org):
    plain = key_with(client, org)["key"]
    answer = client.post(f"/api/keys/{plain[:15]}/quota", json={"add": 1}, auth=(org.sdk, ""))
    assert (answer.status_code, answer.json["code"]) == (409, "no_quota")
    scopes = ["monitor:read", "monitor:write"]
    target = key_with(client, org, quota=DAY, scopes=scopes)["key"]
    weaker = make_key("custom", ["monitor:read"])
    answer = client.post(f"/api/keys/{target[:15]}/quota", json={"add": 1}, auth=(weaker, ""))
    assert (answer.status_code, answer.json["code"]) == (403, "forbidden")
    answer = client.post(
        f"/api/keys/{target[:15]}/quota", json={"add": 1}, auth=(other_org.sdk, "")
    )
    assert answer.status_code == 404
    assert events(client, org.sdk, "key.quota") == []


def test_a_rotations_successor_spends_the_same_count(client, org):
    key = key_with(client, org, quota=DAY)["key"]
    use(client, key)
    use(client, key)
    successor = rotate(client, org.sdk, key[:15]).json
    assert (successor["quota"], successor["quota_remaining"]) == (DAY, 1)
    assert use(client, successor["key"]).status_code == 201
    assert_quota_exceeded(use(client, successor["key"]))


def test_changing_the_quota_keeps_what_was_used(client, org):
    key = key_with(client, org, quota={"requests": 10, "period": "day"})["key"]
    for _ in range(3):
        use(client, key)
    smaller = update(client, org.sdk, key[:15], quota={"requests": 5, "period": "day"})
    assert smaller.json["quota_remaining"] == 2
    monthly = update(client, org.sdk, key[:15], quota={"requests": 4, "period": "month"})
    assert monthly.json["quota_remaining"] == 1
    removed = update(client, org.sdk, key[:15], quota=None)
    assert (removed.json["quota"], removed.json["quota_remaining"]) == (None, None)
    assert [use(client, key).status_code for _ in range(3)] == [201] * 3
    changes = [event["details"]["quota"] for event in events(client, org.sdk, "key.updated")]
    assert changes == [  # newest first
        [{"requests": 4, "period": "month"}, None],
        [{"requests": 5, "period": "day"}, {"requests": 4, "period": "month"}],
        [{"requests": 10, "period": "day"}, {"requests": 5, "period": "day"}],
    ]


def test_the_end_of_the_day_renews_a_day_quota(client, org, monkeypatch):
    key = key_with(client, org, quota={"requests": 1, "period": "day"})["key"]
    assert use(client, key).status_code == 201
    assert_quota_exceeded(use(client, key))
    tomorrow = periods.window("day", uses.utcnow()).end
    for module in (uses, quotas):
        monkeypatch.setattr(module, "utcnow", lambda: tomorrow)
    assert use(client, key).status_code == 201
    assert read(client, org, key)["quota_remaining"] == 0


@pytest.mark.parametrize(
    ("moment", "period", "start", "end"),
    [
        (datetime(2026, 11, 27, 13, 5), "day", "2026-11-27", datetime(2026, 11, 28)),
        (datetime(2026, 11, 27, 13, 5), "week", "week-2026-11-23", datetime(2026, 11, 30)),
        (datetime(2026, 11, 30, 0, 0), "week", "week-2026-11-30", datetime(2026, 12, 7)),
        (datetime(2026, 12, 31, 23, 59), "month", "month-2026-12", datetime(2027, 1, 1)),
        (datetime(2026, 2, 1), "month", "month-2026-02", datetime(2026, 3, 1)),
        (datetime(2026, 2, 1), "lifetime", "lifetime", None),
    ],
)
def test_periods_are_utc_calendar_periods(moment, period, start, end):
    assert periods.window(period, moment) == (start, end)


@pytest.mark.parametrize(
    "quota",
    [
        {"requests": 0, "period": "day"},
        {"requests": 1_000_000_001, "period": "day"},
        {"requests": "5", "period": "day"},
        {"requests": 5, "period": "year"},
        {"requests": 5},
        {"period": "day"},
        {"requests": 5, "period": "day", "burst": 1},
        [5, "day"],
    ],
)
def test_a_bad_quota_is_422_naming_it(client, org, quota):
    answer = create(client, org.sdk, quota=quota)
    assert answer.status_code == 422, answer.json
    assert "quota" in answer.json["errors"]
    made = key_with(client, org)
    answer = update(client, org.sdk, made["key"][:15], quota=quota)
    assert answer.status_code == 422
    assert "quota" in answer.json["errors"]


def test_a_refusal_for_the_quota_is_counted_in_the_usage(client, org):
    key = key_with(client, org, quota={"requests": 1, "period": "day"})["key"]
    use(client, key)
    use(client, key)
    from app.usage import counter as usage_counter

    usage_counter.flush(client.application)
    usage = client.get(f"/api/keys/{key[:15]}/usage", auth=(org.sdk, "")).json
    assert usage["total"] == {"allowed": 1, "refused": {"quota_exceeded": 1}}


def test_the_mcp_tools_take_and_show_the_quota(client, org):
    arguments = {"name": "m", "kind": "custom", "scopes": ["monitor:read"], "quota": DAY}
    made = call(client, org.sdk, "create_key", arguments)["structuredContent"]
    assert (made["quota"], made["quota_remaining"]) == (DAY, 3)
    shown = call(client, org.sdk, "get_key", {"key": made["key"]})["structuredContent"]
    assert shown["quota_remaining"] == 3
    lifetime = {"requests": 1, "period": "lifetime"}
    changed = call(client, org.sdk, "update_key", {"key": made["key"][:15], "quota": lifetime})
    assert changed["structuredContent"]["quota"] == lifetime
    bad = {"key": made["key"][:15], "quota": {"requests": 0, "period": "day"}}
    assert refused(call(client, org.sdk, "update_key", bad))["code"] == "validation_error"


def test_a_caller_with_a_quota_gives_no_more_and_takes_its_own_by_default(client, org):
    """Never more than the caller, in quota: the same period, no more requests, never none; a key
    made without naming one takes the caller's, and no key loosens its own."""
    caller = key_with(client, org, quota={"requests": 10, "period": "day"})["key"]
    for quota in ({"requests": 11, "period": "day"}, {"requests": 5, "period": "week"}, None):
        answer = create(client, caller, quota=quota)
        assert (answer.status_code, answer.json["code"]) == (403, "exceeds_caller"), quota
        assert "quota" in answer.json["errors"]
    assert create(client, caller).json["quota"] == {"requests": 10, "period": "day"}
    assert create(client, caller, quota={"requests": 4, "period": "day"}).status_code == 201
    answer = update(client, caller, caller[:15], quota=None)
    assert (answer.status_code, answer.json["code"]) == (403, "exceeds_caller")
    answer = update(client, caller, caller[:15], quota={"requests": 11, "period": "day"})
    assert answer.status_code == 403
    assert read(client, org, caller)["quota"] == {"requests": 10, "period": "day"}


def test_at_mcp_only_tool_calls_spend_the_quota(client, org):
    """At /mcp only a tool call is a use: the protocol's other messages spend none of it; of the
    tool calls, those that make a key do (docs/api.md)."""
    quota = {"requests": 2, "period": "day"}
    key = key_with(client, org, kind="sdk_integration", scopes=[], quota=quota)
    for _ in range(3):
        assert listed(client, key["key"])
    assert rpc(client, key["key"], "ping").status_code == 200
    for _ in range(2):  # tools that make no key spend none of it either
        assert call(client, key["key"], "list_keys", {}).get("isError") is not True
    telemetry = {"name": "t", "kind": "telemetry"}
    for _ in range(2):
        assert call(client, key["key"], "create_key", telemetry).get("isError") is not True
    answer = rpc(client, key["key"], "tools/call", {"name": "create_key", "arguments": telemetry})
    assert_quota_exceeded(answer)
    assert read(client, org, key["key"])["quota_remaining"] == 0


def test_a_key_cannot_grant_uses_to_its_own_quota(client, org):
    metered = key_with(client, org, quota={"requests": 5, "period": "lifetime"})["key"]
    own = client.post(f"/api/keys/{metered[:15]}/quota", json={"add": 1000}, auth=(metered, ""))
    assert (own.status_code, own.json["code"]) == (403, "exceeds_caller")
    assert "quota" in own.json["errors"]
    successor = rotate(client, org.sdk, metered[:15]).json["key"]
    taken_over = client.post(
        f"/api/keys/{successor[:15]}/quota", json={"add": 1}, auth=(successor, "")
    )
    assert taken_over.status_code == 403
    other = key_with(client, org, quota={"requests": 1, "period": "day"})["key"]
    granted = client.post(f"/api/keys/{other[:15]}/quota", json={"add": 1}, auth=(successor, ""))
    assert (granted.status_code, granted.json["quota_remaining"]) == (200, 2)


@pytest.mark.parametrize("period", periods.PERIODS)
def test_a_window_given_again_is_the_one_the_calendar_gives(period):
    """periods.window keeps the window it gave last: moments every 7 hours over two years,
    forwards then backwards, each get the window the calendar's arithmetic gives."""
    start = datetime(2026, 1, 1)
    moments = [start + timedelta(hours=7 * n, microseconds=n) for n in range(2 * 1252)]
    for moment in [*moments, *reversed(moments)]:
        expected = (periods.LIFETIME, None)
        if period != periods.LIFETIME:
            expected = periods._window(period, moment)[1]
        assert periods.window(period, moment) == expected
