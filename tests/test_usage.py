"""Per-key usage (docs/design.md, "Usage") over HTTP: each check of a key counted in memory by
outcome and checked scope, written in batches (forced here with usage_counter.flush, or by the
thread), and GET /api/keys/<key>/usage: the window, its buckets, totals, scopes and unused
scopes, its validation and permissions."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import OperationalError

from app.domain.keyformat import identifier_of
from app.usage import counter as usage_counter
from tests.databases import ON_POSTGRESQL
from tests.test_extension import make_host  # noqa: F401 (a fixture)
from tests.test_mcp import call, listed
from tests.test_policy_doors import (  # noqa: F401 (policy_key: a fixture)
    ELSEWHERE,
    HANDSHAKE,
    TOOL_CALL,
    expire,
    limited_sdk_key,
    policy_key,
    send,
)

FORWARD = "/api/forward-auth"


def shown(key: str) -> str:
    return identifier_of(key) + "..."


def usage_of(client, org, key: str, query: str = "", flush=True) -> dict:
    if flush:
        usage_counter.flush(client.application)
    answer = client.get(f"/api/keys/{shown(key)}/usage{query}", auth=(org.sdk, ""))
    assert answer.status_code == 200, answer.json
    return answer.json


def test_forward_auth_counts_uses_refusals_and_the_scopes_it_let_through(client, org, make_key):
    key = make_key(scopes=("monitor:read", "site:read", "issue:read"))
    for _ in range(3):
        assert client.get(f"{FORWARD}?scope=monitor:read", auth=(key, "")).status_code == 204
    both = f"{FORWARD}?scope=site:read&scope=monitor:read"
    assert client.get(both, auth=(key, "")).status_code == 204
    assert client.get(f"{FORWARD}?scope=site:write", auth=(key, "")).status_code == 403
    assert client.get(FORWARD, auth=(key, "")).status_code == 204  # no scope named

    body = usage_of(client, org, key)
    assert body["key"] == shown(key)
    assert body["granularity"] == "day"
    assert body["total"] == {"allowed": 5, "refused": {"forbidden": 1}}
    assert body["scopes"] == {"monitor:read": 4, "site:read": 1}  # in the scope table's order
    assert body["unused_scopes"] == ["issue:read"]
    assert body["buckets"][-1] == {
        "start": datetime.now(UTC).strftime("%Y-%m-%dT00:00:00.000000Z"),
        "allowed": 5,
        "refused": {"forbidden": 1},
    }
    assert sum(bucket["allowed"] for bucket in body["buckets"]) == 5


def test_each_refusal_is_counted_by_its_code_and_batches_add_up(
    client,
    org,
    policy_key,  # noqa: F811 (a fixture)
    sql,
):
    limited = policy_key(rate_limit={"requests": 1, "seconds": 60})
    assert client.get(FORWARD, auth=(limited, "")).status_code == 204
    assert client.get(FORWARD, auth=(limited, "")).status_code == 429
    usage_counter.flush(client.application)
    assert client.get(FORWARD, auth=(limited, "")).status_code == 429
    assert usage_of(client, org, limited)["total"] == {
        "allowed": 1,
        "refused": {"rate_limited": 2},
    }

    walled = policy_key(allowed_ips=["10.0.0.0/8"])
    assert client.get(FORWARD, auth=(walled, ""), environ_base=ELSEWHERE).status_code == 403
    assert usage_of(client, org, walled)["total"]["refused"] == {"ip_not_allowed": 1}

    disabled = policy_key(enabled=False)
    assert client.get(FORWARD, auth=(disabled, "")).status_code == 401
    expired = policy_key()
    expire(sql, expired)
    assert client.get(FORWARD, auth=(expired, "")).status_code == 401
    assert usage_of(client, org, disabled)["total"]["refused"] == {"disabled_key": 1}
    assert usage_of(client, org, expired)["total"]["refused"] == {"expired_key": 1}


def test_a_key_let_in_then_refused_by_a_rule_is_one_refusal(client, org, make_key):
    telemetry = client.get("/api/keys", auth=(org.telemetry, ""))
    assert telemetry.status_code == 403
    narrow = make_key(kind="custom", scopes=("monitor:read",))
    wide = {"name": "w", "kind": "custom", "scopes": ["site:write"]}
    assert client.post("/api/keys", json=wide, auth=(narrow, "")).status_code == 403
    sdk_key = client.get("/api/keys", auth=(org.sdk, "")).json["data"][1]["key"]
    assert client.delete(f"/api/keys/{sdk_key}", auth=(narrow, "")).status_code == 403

    assert usage_of(client, org, org.telemetry)["total"] == {
        "allowed": 0,
        "refused": {"forbidden": 1},
    }
    assert usage_of(client, org, narrow)["total"] == {
        "allowed": 0,
        "refused": {"forbidden": 1, "scope_exceeds_caller": 1},
    }


def test_at_mcp_the_uses_are_the_tool_calls(client, org, policy_key):  # noqa: F811
    """A host's handshake, listing and pings are no uses (docs/design.md, "Promises kept by
    default"): the usage shows the tool calls alone, the one its limit refused included."""
    key = limited_sdk_key(policy_key, 3)
    for _ in range(2):
        for message in HANDSHAKE:
            assert send(client, key, *message).status_code in (200, 202)
    calls = [send(client, key, *TOOL_CALL).status_code for _ in range(4)]
    assert calls == [200, 200, 200, 429]
    send(client, key, "tools/call", None)  # malformed: still a use, spent and refused
    assert usage_of(client, org, key)["total"] == {
        "allowed": 3,
        "refused": {"rate_limited": 2},
    }


def test_the_extension_counts_the_scopes_it_requires(make_host, org, make_key):  # noqa: F811
    host = make_host(org.name)
    client = host.test_client()
    key = make_key(scopes=("monitor:read", "site:read"))
    assert client.get("/monitors", auth=(key, "")).status_code == 200
    body = usage_of(client, org, key)
    assert body["total"]["allowed"] == 1
    assert body["scopes"] == {"monitor:read": 1}
    assert body["unused_scopes"] == ["site:read"]


def test_hour_buckets_cover_the_window_with_zeros_oldest_first(client, org):
    client.get("/api/keys", auth=(org.sdk, ""))
    now = datetime.now(UTC)
    since = (now - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = usage_of(client, org, org.sdk, f"?since={since}&granularity=hour")
    hour = now.replace(minute=0, second=0, microsecond=0, tzinfo=None)
    starts = [hour - timedelta(hours=n) for n in (3, 2, 1, 0)]
    assert [b["start"] for b in body["buckets"]] == [s.isoformat() + ".000000Z" for s in starts]
    assert [b["allowed"] for b in body["buckets"]] == [0, 0, 0, 1]  # this read is not written yet
    assert body["since"] == body["buckets"][0]["start"]
    assert body["until"] == (hour + timedelta(hours=1)).isoformat() + ".000000Z"
    assert body["scopes"] == {}
    assert body["unused_scopes"] is None  # no check named a scope: nothing to judge by


def test_the_default_window_is_the_last_30_days_by_day(client, org):
    client.get("/api/keys", auth=(org.sdk, ""))
    body = usage_of(client, org, org.sdk)
    assert len(body["buckets"]) == 31
    assert all(b["allowed"] == 0 and b["refused"] == {} for b in body["buckets"][:-1])
    assert body["buckets"][-1]["allowed"] == 1


@pytest.mark.parametrize(
    "query",
    [
        "?granularity=week",
        "?since=2026-01-01T00:00:00",  # no offset
        "?since=yesterday",
        "?since=2026-03-01T00:00:00Z&until=2026-01-01T00:00:00Z",
        "?since=2026-01-01T00:00:00Z&until=2026-04-02T00:00:00Z",  # 91 days
        "?granularity=day&granularity=hour",
        "?from=2026-01-01T00:00:00Z",
    ],
)
def test_bad_arguments_are_422(client, org, query):
    answer = client.get(f"/api/keys/{shown(org.sdk)}/usage{query}", auth=(org.sdk, ""))
    assert answer.status_code == 422, answer.json


def test_90_days_is_the_longest_window(client, org):
    query = "?since=2026-01-01T00:00:00Z&until=2026-04-01T00:00:00Z&granularity=hour"
    assert len(usage_of(client, org, org.sdk, query)["buckets"]) == 90 * 24


def test_permissions_are_those_of_reading_the_key(client, org, other_org):
    path = f"/api/keys/{shown(org.sdk)}/usage"
    assert client.get(path).status_code == 401
    assert client.get(path, auth=(org.telemetry, "")).status_code == 403
    assert client.get(path, auth=(other_org.sdk, "")).status_code == 404
    assert client.get(path, auth=(org.sdk, "")).status_code == 200


def test_a_deleted_keys_usage_goes_with_it(client, org, make_key, sql):
    kept, gone = make_key(), make_key()
    client.get(FORWARD, auth=(kept, ""))
    client.get(FORWARD, auth=(gone, ""))
    usage_counter.flush(client.application)
    client.get(FORWARD, auth=(gone, ""))  # counted, then deleted before the next batch
    assert client.delete(f"/api/keys/{shown(gone)}", auth=(org.sdk, "")).status_code == 204
    usage_counter.flush(client.application)
    rows = sql("SELECT key_id, count FROM key_usage WHERE outcome = 'allowed'")
    assert len(rows) == 2  # the sdk key's reads and `kept`
    assert usage_of(client, org, kept)["total"]["allowed"] == 1


def test_old_hours_are_pruned_by_a_batch_at_most_once_an_hour(client, org, sql):
    client.get("/api/keys", auth=(org.sdk, ""))
    usage_counter.flush(client.application)
    sql(
        "INSERT INTO key_usage (key_id, hour, outcome, scope, count)"
        " SELECT MIN(id), :hour, 'allowed', '', 7 FROM api_keys",
        hour=datetime(2000, 1, 1),
    )
    client.get("/api/keys", auth=(org.sdk, ""))
    usage_counter.flush(client.application)  # pruned less than an hour ago: kept
    assert sql("SELECT count FROM key_usage WHERE hour < '2001-01-01'") == [(7,)]
    client.application.extensions["usage"].pruned -= usage_counter.PRUNE_SECONDS
    client.get("/api/keys", auth=(org.sdk, ""))  # a batch with nothing to write prunes nothing
    usage_counter.flush(client.application)
    assert sql("SELECT count FROM key_usage WHERE hour < '2001-01-01'") == []


@pytest.mark.parametrize("app_config", [{"USAGE_FLUSH_SECONDS": 0.2}])
def test_the_thread_writes_a_use_within_twice_the_flush_time(client, org, sql):
    client.get("/api/keys", auth=(org.sdk, ""))
    used = time.monotonic()
    while not sql("SELECT count FROM key_usage"):
        assert time.monotonic() - used < 0.4 + 0.5  # twice the window, and a slow machine's margin
        time.sleep(0.02)


def test_counts_a_batch_could_not_write_wait_for_the_next(client, org, monkeypatch, caplog):
    client.get("/api/keys", auth=(org.sdk, ""))

    def down(dialect):
        raise OperationalError("INSERT", {}, Exception("the database is down"))

    with monkeypatch.context() as patched:
        patched.setattr(usage_counter, "_upsert", down)
        usage_counter.flush(client.application)
    assert "counts not written, kept for the next batch" in caplog.text
    assert usage_of(client, org, org.sdk)["total"]["allowed"] == 1


WRITERS = 4
TRIALS = 25


def write_at_once(usage, together: threading.Barrier) -> None:
    together.wait()
    usage.flush()


@pytest.mark.skipif(not ON_POSTGRESQL, reason="row locks: PostgreSQL's (SQLite writes alone)")
def test_workers_batches_of_the_same_rows_written_at_once_never_deadlock(
    make_app, database_url, org, make_key, sql, caplog
):
    """Workers whose batches hold the same rows, each counted in its own order, write them
    at the same instant, again and again: each batch locks its rows in one order, so
    PostgreSQL finds no deadlock (which would leave a batch unwritten) and every count
    arrives."""
    for n in range(4):
        make_key(name=f"k{n}")
    ids = [key_id for (key_id,) in sql("SELECT id FROM api_keys")]
    hour = int(time.time() // 3600)
    rows = [
        (key_id, hour, outcome, scope)
        for key_id in ids
        for outcome in ("allowed", "forbidden")
        for scope in ("", "monitor:read", "site:read")
    ]
    workers = [
        make_app(SQLALCHEMY_DATABASE_URI=database_url).extensions["usage"] for _ in range(WRITERS)
    ]
    shuffled = random.Random(32)  # noqa: S311 (an order, no secret)
    for _ in range(TRIALS):
        for usage in workers:
            usage.counts = dict.fromkeys(shuffled.sample(rows, len(rows)), 1)
        together = threading.Barrier(WRITERS)
        threads = [
            threading.Thread(target=write_at_once, args=(usage, together)) for usage in workers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert "not written" not in caplog.text, caplog.text
    [(total,)] = sql("SELECT sum(count) FROM key_usage")
    assert total == TRIALS * WRITERS * len(rows)


def test_a_count_that_fails_never_fails_the_answer(client, make_key, caplog):
    """The counters run as the answer starts, outside Flask's error handlers: one that raises
    is logged, and the answer goes out as it was."""

    def fails(*args) -> None:
        raise RuntimeError("the count failed")

    client.application.extensions["verdicts"][:] = [fails]  # the wrapper's own list
    assert client.get(FORWARD, auth=(make_key(), "")).status_code == 204
    assert "a counter of the request failed" in caplog.text


@pytest.mark.parametrize("app_config", [{"USAGE_ENABLED": False}])
def test_usage_enabled_false_counts_nothing(client, org):
    client.get("/api/keys", auth=(org.sdk, ""))
    assert usage_of(client, org, org.sdk)["total"] == {"allowed": 0, "refused": {}}


def test_the_mcp_tool_answers_the_rest_body_and_is_read_only(client, org, make_key):
    key = make_key(scopes=("monitor:read", "site:read"))
    client.get(f"{FORWARD}?scope=site:read", auth=(key, ""))
    query = "?since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00Z&granularity=hour"
    rest = usage_of(client, org, key, query)
    tool = listed(client, org.sdk)["get_key_usage"]
    assert tool["annotations"]["readOnlyHint"] is True
    assert set(tool["inputSchema"]["properties"]) == {"key", "since", "until", "granularity"}
    arguments = {
        "key": shown(key),
        "since": "2026-01-01T00:00:00Z",
        "until": "2026-01-02T00:00:00Z",
        "granularity": "hour",
    }
    # The REST body, its buckets with no use left out (an agent reads the days with uses).
    used = [bucket for bucket in rest["buckets"] if bucket["allowed"] or bucket["refused"]]
    assert call(client, org.sdk, "get_key_usage", arguments)["structuredContent"] == (
        rest | {"buckets": used}
    )
    today = call(client, org.sdk, "get_key_usage", {"key": shown(key)})["structuredContent"]
    assert today["scopes"] == {"site:read": 1}
    refused = call(client, org.sdk, "get_key_usage", {"key": shown(key), "granularity": "week"})
    assert refused["isError"] is True


@pytest.mark.parametrize(
    "query",
    [
        "until=0001-01-07T09:20:04Z&granularity=day",
        "until=9999-12-31T23:59:59Z&granularity=hour",
        "since=9999-12-31T12:00:00Z&until=9999-12-31T23:00:00Z&granularity=day",
    ],
)
def test_a_window_at_the_ends_of_time_is_422_not_500(client, org, query):
    """Found by the fuzz test: a window whose whole buckets fall outside years 1 to 9999."""
    answer = client.get(f"/api/keys/{org.sdk}/usage?{query}", auth=(org.sdk, ""))
    assert answer.status_code == 422, answer.json
    assert set(answer.json["errors"]) <= {"since", "until"}
