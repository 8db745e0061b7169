"""An organization's own policy (docs/design.md, "Organization policy"): the operator sets it with
`flask org policy`, its sdk_integration keys read it at GET /api/organization, and every key made or
changed afterwards keeps within it: `max_keys` (409 `key_limit_reached`),
`max_key_lifetime_days` (403 `organization_policy`, and the longest allowed for a key that
names no expiry), `default_rate_limit`; `GET /api/keys?outside_policy=true` lists the keys
made before a stricter policy. tests/server/test_organization_limit.py races creates
against `max_keys` through a real gunicorn."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

NOW_SLACK = timedelta(seconds=30)


def policy(runner, name: str, *options: str):
    """`flask org policy NAME OPTIONS...`'s result."""
    return runner.invoke(args=["org", "policy", name, *options])


def set_policy(runner, name: str, *options: str) -> dict:
    result = policy(runner, name, *options, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def create(client, caller: str, **body):
    """POST /api/keys: a custom key with monitor:read, or as `body` says (the fixed kinds
    without scopes)."""
    kind = body.setdefault("kind", "custom")
    body = {"name": "made"} | ({"scopes": ["monitor:read"]} if kind == "custom" else {}) | body
    return client.post("/api/keys", json=body, auth=(caller, ""))


def when(shown: str) -> datetime:
    return datetime.fromisoformat(shown.replace("Z", "+00:00"))


def in_days(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).isoformat()


def stored(sql) -> list:
    """What a refused request must leave unchanged: every key and audit event."""
    keys = sql("SELECT identifier, expires_at, rate_limit_requests FROM api_keys ORDER BY id")
    return [keys, sql("SELECT count(*) FROM audit_events")]


# The operator's command.


def test_the_command_without_options_shows_the_policy_of_a_new_organization(runner, org):
    result = policy(runner, "acme")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        'Organization "acme" holds 2 keys. Its policy:',
        "  max_keys: none",
        "  max_key_lifetime_days: none",
        "  default_rate_limit: none",
        "  default_quota: none",
    ]


def test_the_command_counts_one_key_in_the_singular(runner, client, org):
    client.delete(f"/api/keys/{org.telemetry}", auth=(org.sdk, ""))
    assert policy(runner, "acme").stdout.startswith('Organization "acme" holds 1 key. ')


def test_the_command_sets_each_rule_and_prints_the_policy(runner, org):
    options = ("--max-keys", "10", "--max-key-lifetime-days", "90")
    options += ("--default-rate-limit", "100/60", "--default-quota", "1000/Day")
    result = policy(runner, "acme", *options)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == [
        "  max_keys: 10",
        "  max_key_lifetime_days: 90",
        "  default_rate_limit: 100/60 (100 requests per 60 s)",
        "  default_quota: 1000/day",
    ]


def test_a_rule_not_given_stays_and_none_clears_one(runner, org):
    set_policy(runner, "acme", "--max-keys", "10", "--default-rate-limit", "5/1")
    shown = set_policy(runner, "acme", "--max-key-lifetime-days", "30")
    assert shown["policy"] == {
        "max_keys": 10,
        "max_key_lifetime_days": 30,
        "default_rate_limit": {"requests": 5, "seconds": 1},
        "default_quota": None,
    }
    shown = set_policy(runner, "acme", "--max-keys", "none", "--default-rate-limit", "NONE")
    assert shown["policy"] == {
        "max_keys": None,
        "max_key_lifetime_days": 30,
        "default_rate_limit": None,
        "default_quota": None,
    }


def test_the_json_is_what_the_api_shows(runner, client, org):
    printed = set_policy(runner, "acme", "--max-keys", "10")
    assert printed["name"] == "acme" and printed["key_count"] == 2
    answer = client.get("/api/organization", auth=(org.sdk, ""))
    assert answer.status_code == 200, answer.json
    assert answer.json == printed


def test_an_unknown_organization_is_one_line_on_stderr_and_exit_1(runner, org, sql):
    result = policy(runner, "nobody", "--max-keys", "10")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == ['Error: no organization is named "nobody"']
    assert result.stdout == ""
    assert sql("SELECT max_keys FROM organizations") == [(None,)]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--max-keys", "0"), "--max-keys: Must be a whole number from 1 to 100000."),
        (("--max-keys", "100001"), "--max-keys: Must be a whole number from 1 to 100000."),
        (("--max-keys", "ten"), "--max-keys: give a whole number, or none"),
        (("--max-keys", "-3"), "--max-keys: give a whole number, or none"),
        (("--max-key-lifetime-days", "3651"), "--max-key-lifetime-days: Must be a whole number"),
        (("--max-key-lifetime-days", ""), "--max-key-lifetime-days: give a whole number"),
        (("--default-rate-limit", "100"), "--default-rate-limit: give REQUESTS/SECONDS"),
        (("--default-rate-limit", "1/2/3"), "--default-rate-limit: give REQUESTS/SECONDS"),
        (("--default-rate-limit", "100/0"), "--default-rate-limit: Item seconds: Must be"),
        (("--default-rate-limit", "0/60"), "--default-rate-limit: Item requests: Must be"),
    ],
)
def test_a_bad_value_is_one_line_on_stderr_and_nothing_is_written(runner, org, sql, options, said):
    before = sql("SELECT * FROM organizations")
    # A good rule beside the bad one is not written either.
    result = policy(runner, "acme", "--max-keys", "5", *options)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr
    assert sql("SELECT * FROM organizations") == before


# GET /api/organization.


def test_an_sdk_integration_key_reads_its_organization(client, org, other_org, runner):
    set_policy(runner, "globex", "--max-keys", "3")
    answer = client.get("/api/organization", auth=(org.sdk, ""))
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    body = answer.json
    assert list(body) == ["name", "created", "key_count", "policy"]
    assert (body["name"], body["key_count"]) == ("acme", 2)
    assert abs(when(body["created"]) - datetime.now(UTC)) < NOW_SLACK
    assert body["policy"] == {
        "max_keys": None,
        "max_key_lifetime_days": None,
        "default_rate_limit": None,
        "default_quota": None,
    }
    theirs = client.get("/api/organization", auth=(other_org.sdk, "")).json
    assert (theirs["name"], theirs["policy"]["max_keys"]) == ("globex", 3)


def test_key_count_counts_every_key_until_deleted(client, org, make_key):
    expired = make_key()
    make_key()
    client.post(f"/api/keys/{expired}/rotate", json={"grace_seconds": 60}, auth=(org.sdk, ""))
    assert client.get("/api/organization", auth=(org.sdk, "")).json["key_count"] == 5
    client.delete(f"/api/keys/{expired}", auth=(org.sdk, ""))
    assert client.get("/api/organization", auth=(org.sdk, "")).json["key_count"] == 4


def test_other_keys_may_not_read_it(client, org, make_key):
    everything = make_key(scopes=ALL_SCOPES)
    answer = client.get("/api/organization", auth=(everything, ""))
    assert answer.status_code == 403
    assert answer.json["code"] == "forbidden"
    assert "sdk_integration" in answer.json["detail"]
    telemetry = client.get("/api/organization", auth=(org.telemetry, ""))
    assert (telemetry.status_code, telemetry.json["code"]) == (403, "forbidden")
    assert telemetry.json["detail"] == "Telemetry keys cannot manage API keys."
    assert client.get("/api/organization").status_code == 401


ALL_SCOPES = (
    "monitor:read",
    "monitor:write",
    "monitor:telemetry",
    "site:read",
    "site:write",
    "statuspage:read",
    "statuspage:write",
    "issue:read",
    "issue:write",
    "integration:read",
    "integration:write",
)


# max_keys.


def test_a_create_at_max_keys_is_409_and_writes_nothing(client, org, runner, sql):
    set_policy(runner, "acme", "--max-keys", "3")
    assert create(client, org.sdk).status_code == 201
    before = stored(sql)
    refused = create(client, org.sdk)
    assert refused.status_code == 409
    assert refused.json["code"] == "key_limit_reached"
    assert refused.json["detail"] == (
        "The organization's policy (max_keys) allows at most 3 keys, and it holds 3: delete "
        "a key before making another."
    )
    assert stored(sql) == before


def test_a_delete_makes_room_again(client, org, runner, make_key):
    made = make_key()
    set_policy(runner, "acme", "--max-keys", "3")
    assert create(client, org.sdk).status_code == 409
    assert client.delete(f"/api/keys/{made}", auth=(org.sdk, "")).status_code == 204
    assert create(client, org.sdk).status_code == 201


def test_a_policy_below_the_count_keeps_the_keys_and_refuses_new_ones(client, org, runner):
    set_policy(runner, "acme", "--max-keys", "1")
    refused = create(client, org.sdk)
    assert refused.status_code == 409
    assert "at most 1 key, and it holds 2" in refused.json["detail"]
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == 2


def test_the_limit_is_per_organization(client, org, other_org, runner):
    set_policy(runner, "acme", "--max-keys", "2")
    assert create(client, other_org.sdk).status_code == 201


def test_a_rotation_without_grace_replaces_the_key_at_the_limit(client, org, runner, make_key):
    made = make_key()
    set_policy(runner, "acme", "--max-keys", "3")
    rotated = client.post(f"/api/keys/{made}/rotate", auth=(org.sdk, ""))
    assert rotated.status_code == 201, rotated.json
    assert client.get("/api/organization", auth=(org.sdk, "")).json["key_count"] == 3


def test_a_rotation_with_grace_needs_room_for_the_old_key(client, org, runner, make_key, sql):
    made = make_key()
    set_policy(runner, "acme", "--max-keys", "3")
    before = stored(sql)
    path = f"/api/keys/{made}/rotate"
    refused = client.post(path, json={"grace_seconds": 60}, auth=(org.sdk, ""))
    assert refused.status_code == 409
    assert refused.json["code"] == "key_limit_reached"
    assert refused.json["detail"].endswith(
        "rotate with grace_seconds 0 (the old key is deleted at once), or delete a key first."
    )
    assert stored(sql) == before
    set_policy(runner, "acme", "--max-keys", "4")
    assert client.post(path, json={"grace_seconds": 60}, auth=(org.sdk, "")).status_code == 201


def test_the_operator_may_always_mint_a_key(runner, org, client):
    set_policy(runner, "acme", "--max-keys", "2")
    result = runner.invoke(
        args=["keys", "create", "--org", "acme", "--kind", "sdk_integration", "--name", "rescue"]
    )
    assert result.exit_code == 0, result.output
    assert client.get("/api/organization", auth=(org.sdk, "")).json["key_count"] == 3


# max_key_lifetime_days.


def test_a_create_without_expiry_gets_the_longest_allowed(client, org, runner):
    set_policy(runner, "acme", "--max-key-lifetime-days", "30")
    made = create(client, org.sdk)
    assert made.status_code == 201, made.json
    expected = datetime.now(UTC) + timedelta(days=30)
    assert abs(when(made.json["expires_at"]) - expected) < NOW_SLACK
    read = client.get(f"/api/keys/{made.json['key']}", auth=(org.sdk, ""))
    assert read.json["expires_at"] == made.json["expires_at"]


def test_a_caller_that_expires_sooner_gives_its_own_expiry(client, org, runner):
    soon = create(client, org.sdk, kind="sdk_integration", expires_at=in_days(2))
    caller = soon.json["key"]
    set_policy(runner, "acme", "--max-key-lifetime-days", "30")
    made = create(client, caller)
    assert made.status_code == 201, made.json
    assert made.json["expires_at"] == soon.json["expires_at"]


@pytest.mark.parametrize("expires_at", [None, "beyond"])
def test_a_create_naming_an_expiry_beyond_the_lifetime_is_403(client, org, runner, sql, expires_at):
    set_policy(runner, "acme", "--max-key-lifetime-days", "30")
    before = stored(sql)
    named = in_days(30.01) if expires_at else None
    refused = create(client, org.sdk, expires_at=named)
    assert refused.status_code == 403
    body = refused.json
    assert body["code"] == "organization_policy"
    latest = when(body["detail"].rpartition("no later than ")[2].rstrip("."))
    assert abs(latest - (datetime.now(UTC) + timedelta(days=30))) < NOW_SLACK
    assert body["detail"] == (
        "The organization's policy (max_key_lifetime_days) lets a key live at most 30 days: "
        f"it must expire no later than {latest:%Y-%m-%dT%H:%M:%S}Z."
    )
    assert body["errors"] == {"expires_at": [body["detail"]]}
    assert stored(sql) == before


def test_a_lifetime_of_one_day_says_day(client, org, runner):
    set_policy(runner, "acme", "--max-key-lifetime-days", "1")
    refused = create(client, org.sdk, expires_at=in_days(2))
    assert "at most 1 day:" in refused.json["detail"]


def test_an_expiry_within_the_lifetime_is_kept(client, org, runner):
    set_policy(runner, "acme", "--max-key-lifetime-days", "30")
    made = create(client, org.sdk, expires_at=in_days(29.9))
    assert made.status_code == 201, made.json
    assert abs(when(made.json["expires_at"]) - when(in_days(29.9))) < NOW_SLACK


def test_the_policy_refusal_comes_after_the_callers_own_bounds(client, org, runner, make_key):
    weak = make_key(scopes=("site:read",))
    set_policy(runner, "acme", "--max-key-lifetime-days", "30", "--max-keys", "3")
    refused = create(client, weak, scopes=["site:write"], expires_at=None)
    assert refused.json["code"] == "scope_exceeds_caller"
    # 403 before 409 (the order of refusals: docs/design.md, "Requests and errors").
    assert create(client, org.sdk, expires_at=None).json["code"] == "organization_policy"


def test_an_update_of_the_expiry_must_keep_within_the_lifetime(client, org, runner, make_key, sql):
    made = make_key()
    set_policy(runner, "acme", "--max-key-lifetime-days", "7")
    path = f"/api/keys/{made}"
    for expires_at in (None, in_days(8)):
        before = stored(sql)
        refused = client.put(path, json={"expires_at": expires_at}, auth=(org.sdk, ""))
        assert refused.status_code == 403, refused.json
        assert refused.json["code"] == "organization_policy"
        assert list(refused.json["errors"]) == ["expires_at"]
        assert stored(sql) == before
    changed = client.put(path, json={"expires_at": in_days(6)}, auth=(org.sdk, ""))
    assert changed.status_code == 200, changed.json


def test_an_update_that_names_no_expiry_leaves_a_key_outside_the_policy_as_it_is(
    client, org, runner, make_key
):
    made = make_key()
    set_policy(runner, "acme", "--max-key-lifetime-days", "7")
    renamed = client.put(f"/api/keys/{made}", json={"name": "renamed"}, auth=(org.sdk, ""))
    assert renamed.status_code == 200, renamed.json
    assert renamed.json["expires_at"] is None


def test_a_successor_gets_the_old_expiry_within_the_lifetime(client, org, runner, make_key):
    made = make_key()
    set_policy(runner, "acme", "--max-key-lifetime-days", "7")
    rotated = client.post(f"/api/keys/{made}/rotate", auth=(org.sdk, ""))
    assert rotated.status_code == 201, rotated.json
    expected = datetime.now(UTC) + timedelta(days=7)
    assert abs(when(rotated.json["expires_at"]) - expected) < NOW_SLACK
    sooner = create(client, org.sdk, expires_at=in_days(3)).json
    again = client.post(f"/api/keys/{sooner['key']}/rotate", auth=(org.sdk, ""))
    assert again.json["expires_at"] == sooner["expires_at"]


def test_a_rotation_naming_an_expiry_beyond_the_lifetime_is_403(client, org, runner, make_key, sql):
    made = make_key()
    set_policy(runner, "acme", "--max-key-lifetime-days", "7")
    before = stored(sql)
    path = f"/api/keys/{made}/rotate"
    refused = client.post(path, json={"expires_at": in_days(8)}, auth=(org.sdk, ""))
    assert refused.status_code == 403
    assert refused.json["code"] == "organization_policy"
    assert stored(sql) == before


# default_rate_limit.


def test_a_key_made_without_a_rate_limit_gets_the_default(client, org, runner):
    set_policy(runner, "acme", "--default-rate-limit", "100/60")
    made = create(client, org.sdk)
    assert made.status_code == 201, made.json
    assert made.json["rate_limit"] == {"requests": 100, "seconds": 60}
    named = create(client, org.sdk, rate_limit={"requests": 5, "seconds": 1})
    assert named.json["rate_limit"] == {"requests": 5, "seconds": 1}
    unlimited = create(client, org.sdk, rate_limit=None)
    assert unlimited.json["rate_limit"] is None


def test_the_default_rate_limit_is_counted_as_the_keys_own(client, org, runner):
    set_policy(runner, "acme", "--default-rate-limit", "2/60")
    made = create(client, org.sdk, kind="sdk_integration").json["key"]
    statuses = [client.get("/api/keys", auth=(made, "")).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_a_successor_keeps_the_old_keys_rate_limit(client, org, runner, make_key):
    made = make_key()
    set_policy(runner, "acme", "--default-rate-limit", "100/60")
    rotated = client.post(f"/api/keys/{made}/rotate", auth=(org.sdk, ""))
    assert rotated.json["rate_limit"] is None


# default_quota.


def test_a_key_made_without_a_quota_gets_the_default_and_spends_it(client, org, runner):
    set_policy(runner, "acme", "--default-quota", "2/week")
    made = create(client, org.sdk, kind="sdk_integration").json
    assert (made["quota"], made["quota_remaining"]) == ({"requests": 2, "period": "week"}, 2)
    checks = [client.get("/api/forward-auth", auth=(made["key"], "")) for _ in range(3)]
    assert [answer.status_code for answer in checks] == [204, 204, 429]
    assert create(client, org.sdk, quota=None).json["quota"] is None
    named = create(client, org.sdk, quota={"requests": 5, "period": "day"}).json
    assert named["quota"] == {"requests": 5, "period": "day"}


@pytest.mark.parametrize(
    ("value", "message"),
    [("1000", "REQUESTS/PERIOD"), ("x/day", "REQUESTS/PERIOD"), ("5/year", "Must be one of")],
)
def test_a_bad_default_quota_is_refused_naming_the_option(runner, org, value, message):
    result = policy(runner, "acme", "--default-quota", value)
    assert result.exit_code == 1
    assert "--default-quota" in result.output and message in result.output


# Keys outside the policy.


def listed(client, caller: str, query: str) -> dict:
    answer = client.get(f"/api/keys?{query}", auth=(caller, ""))
    assert answer.status_code == 200, answer.json
    return answer.json


def test_without_a_lifetime_rule_no_key_is_outside_the_policy(client, org, runner):
    set_policy(runner, "acme", "--max-keys", "2")  # an organization's rule, not a key's
    assert listed(client, org.sdk, "outside_policy=true")["total_count"] == 0
    assert listed(client, org.sdk, "outside_policy=false")["total_count"] == 2


def test_keys_made_before_a_lifetime_rule_are_listed_outside_it(client, org, runner):
    create(client, org.sdk, name="soon", expires_at=in_days(5))
    late = create(client, org.sdk, name="late", expires_at=in_days(40)).json
    create(client, org.sdk, name="forever", kind="telemetry")
    set_policy(runner, "acme", "--max-key-lifetime-days", "30")
    create(client, org.sdk, name="fresh")  # made within it
    outside = listed(client, org.sdk, "outside_policy=true")
    # The starting keys (no expiry), the later one and the telemetry key, oldest first.
    names = ["Telemetry", "SDK Integration", "late", "forever"]
    assert outside["total_count"] == 4
    assert [key["name"] for key in outside["data"]] == names
    inside = listed(client, org.sdk, "outside_policy=false")
    assert [key["name"] for key in inside["data"]] == ["soon", "fresh"]
    # Combined with the other filters and paging; total_count counts what matches.
    by_kind = listed(client, org.sdk, "outside_policy=true&kind=telemetry")
    assert by_kind["total_count"] == 2
    assert [key["name"] for key in by_kind["data"]] == ["Telemetry", "forever"]
    paged = listed(client, org.sdk, "outside_policy=true&page=2&page_size=3")
    assert paged["total_count"] == 4
    assert [key["name"] for key in paged["data"]] == ["forever"]
    # A key brought within the policy leaves the list.
    path = f"/api/keys/{late['key']}"
    client.put(path, json={"expires_at": in_days(10)}, auth=(org.sdk, ""))
    assert listed(client, org.sdk, "outside_policy=true")["total_count"] == 3


@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_a_bad_outside_policy_is_422(client, org, value):
    answer = client.get(f"/api/keys?outside_policy={value}", auth=(org.sdk, ""))
    assert answer.status_code == 422
    assert list(answer.json["errors"]) == ["outside_policy"]
