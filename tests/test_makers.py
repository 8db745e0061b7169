"""Keys bound by the key that made them (docs/design.md, "Identities"): a key made (created or
rotated) by a key with its own rate limit or quota spends its maker's limits as well as its
own, at any depth, so that a holder gets no more uses from a limited key and every key made
from it than the limited key allows; a maker deleted or rotated keeps binding."""

from __future__ import annotations

import pytest

from tests.test_policy import create, rotate, update

DAY_3 = {"requests": 3, "period": "day"}
SDK = {"kind": "sdk_integration", "scopes": None}


def made(client, maker: str, **body) -> dict:
    answer = create(client, maker, **(SDK | body))
    assert answer.status_code == 201, answer.json
    return answer.json


def use(client, key: str):
    """A use of `key`: a check at forward auth (managing keys spends no quota)."""
    return client.get("/api/forward-auth", auth=(key, ""))


def test_a_partner_with_3_uses_a_day_gets_3_in_all_from_every_key_it_makes(client, org):
    """Tried as a new user would: a key with a quota of 3 a day minted keys that passed 18
    uses in one day. Every create is a use of its maker, and each made key spends its
    makers' quotas: 3 allowed requests in all, whoever sends them."""
    partner = made(client, org.sdk, quota=DAY_3)["key"]
    keys, allowed = [partner], 0
    for _ in range(6):  # each generation tries to make the next
        answer = create(client, keys[-1], **SDK)
        if answer.status_code == 201:
            allowed += 1
            keys.append(answer.json["key"])
        else:
            assert answer.status_code == 429, answer.json
            assert answer.json["code"] == "quota_exceeded"
    for key in keys * 3:  # then every key it made uses itself
        allowed += use(client, key).status_code == 204
    assert allowed == 3
    assert len(keys) == 4  # the partner and three generations: one allowed use each


def test_five_generations_of_a_limited_key_share_its_quota(client, org):
    """A quota of 10: five generations made (5 uses), then 30 uses spread over the six
    keys: exactly 5 pass, and the refusals name the partner's quota as a maker's."""
    partner = made(client, org.sdk, quota={"requests": 10, "period": "day"})["key"]
    keys = [partner]
    for _ in range(5):
        keys.append(made(client, keys[-1])["key"])
    answers = [use(client, keys[index % 6]) for index in range(30)]
    assert sum(answer.status_code == 204 for answer in answers) == 5
    refused = [answer.json for answer in answers if answer.status_code != 204]
    assert {body["code"] for body in refused} == {"quota_exceeded"}
    # The partner's own uses are refused by its own quota, every other key's by a maker's.
    assert {body["limit"] for body in refused} <= {"key", "maker"}
    assert "maker" in {body["limit"] for body in refused}


def test_a_rate_limited_key_and_three_keys_it_made_pass_no_more_than_its_limit(client, org):
    """A key limited to 10 an hour and three keys it made passed 24 of 24 uses: now 10 in
    all, the creates included."""
    limit = {"requests": 10, "seconds": 3600}
    maker = made(client, org.sdk, rate_limit=limit)["key"]
    children = [made(client, maker)["key"] for _ in range(3)]
    answers = [use(client, key) for key in [maker, *children] * 6]
    assert sum(answer.status_code == 204 for answer in answers) == 10 - 3
    refusal = next(answer for answer in answers if answer.status_code == 429)
    assert refusal.json["code"] == "rate_limited"
    assert int(refusal.headers["Retry-After"]) >= 1


def test_a_made_key_names_every_rate_limit_that_binds_it(client, org):
    maker = made(client, org.sdk, rate_limit={"requests": 100, "seconds": 60})["key"]
    child = made(client, maker, rate_limit={"requests": 10, "seconds": 60})["key"]
    answer = use(client, child)
    assert answer.status_code == 204
    assert answer.headers["RateLimit-Policy"] == '"key";q=10;w=60, "maker";q=100;w=60'
    assert answer.headers["RateLimit"].startswith('"key";r=9;t=')
    assert '"maker";r=98;t=' in answer.headers["RateLimit"]  # its create and this use


def test_a_key_that_made_keys_keeps_binding_them_once_deleted(client, org):
    maker = made(client, org.sdk, quota={"requests": 4, "period": "week"})["key"]
    child = made(client, maker)["key"]  # the maker's first use
    assert client.delete(f"/api/keys/{maker[:15]}", auth=(org.sdk, "")).status_code == 204
    results = [use(client, child).status_code for _ in range(5)]
    assert results == [204, 204, 204, 429, 429]


def test_a_rotated_maker_hands_its_counts_to_its_successor_and_keeps_binding(client, org):
    maker = made(client, org.sdk, quota={"requests": 5, "period": "day"})["key"]
    child = made(client, maker)["key"]  # 1
    successor = rotate(client, maker, maker[:15]).json["key"]  # 2: the rotation is a use
    assert use(client, child).status_code == 204  # 3
    assert use(client, successor).status_code == 204  # 4
    assert use(client, child).status_code == 204  # 5
    assert use(client, successor).status_code == 429
    assert use(client, child).status_code == 429


def test_a_key_rotated_by_its_maker_stays_bound(client, org):
    maker = made(client, org.sdk, quota={"requests": 4, "period": "day"})["key"]
    child = made(client, maker)["key"]  # 1
    new_child = rotate(client, maker, child[:15]).json["key"]  # 2
    assert [use(client, new_child).status_code for _ in range(3)] == [204, 204, 429]


def test_a_makers_limits_changed_bind_the_keys_it_made_at_once(client, org):
    maker = made(client, org.sdk, quota={"requests": 50, "period": "day"})["key"]
    child = made(client, maker)["key"]  # 1
    narrowed = update(client, org.sdk, maker[:15], quota={"requests": 3, "period": "day"})
    assert narrowed.status_code == 200, narrowed.json
    assert [use(client, child).status_code for _ in range(3)] == [204, 204, 429]
    lifted = update(client, org.sdk, maker[:15], quota=None)
    assert lifted.status_code == 200, lifted.json
    assert use(client, child).status_code == 204  # bound by its own quota (50) alone now


def test_a_key_cannot_grant_uses_to_its_makers_quota(client, org):
    maker = made(client, org.sdk, quota=DAY_3)["key"]
    child = made(client, maker, quota={"requests": 2, "period": "day"})["key"]
    granted = client.post(f"/api/keys/{maker[:15]}/quota", json={"add": 10}, auth=(child, ""))
    assert granted.status_code == 403, granted.json
    assert granted.json["code"] == "exceeds_caller"
    assert "quota" in granted.json["errors"]


def test_a_key_is_made_at_most_sixteen_generations_below_the_operators(client, org):
    keys = [made(client, org.sdk)["key"]]  # org.sdk, the operator's, is the first maker
    for _ in range(15):
        keys.append(made(client, keys[-1])["key"])
    refused = create(client, keys[-1], **SDK)
    assert refused.status_code == 403, refused.json
    assert refused.json["code"] == "exceeds_caller"
    assert "at most 16 generations" in refused.json["detail"]


def test_limits_given_to_a_maker_later_bind_the_keys_it_made(client, org):
    maker = made(client, org.sdk)["key"]
    child = made(client, maker, quota=None)["key"]
    assert update(client, org.sdk, maker[:15], quota=DAY_3).status_code == 200
    assert [use(client, child).status_code for _ in range(4)] == [204, 204, 204, 429]


def test_a_key_cannot_loosen_the_limits_of_a_key_that_made_it(client, org):
    maker = made(client, org.sdk, quota={"requests": 100, "period": "day"})["key"]
    child = made(client, maker)["key"]  # its own quota: 100 a day, the maker's
    narrowed = update(client, org.sdk, maker[:15], quota={"requests": 50, "period": "day"})
    assert narrowed.status_code == 200, narrowed.json
    widened = update(client, child, maker[:15], quota={"requests": 100, "period": "day"})
    assert widened.status_code == 403, widened.json
    assert (widened.json["code"], list(widened.json["errors"])) == ("exceeds_caller", ["quota"])
    lifted = update(client, child, maker[:15], quota=None)
    assert lifted.status_code == 403, lifted.json
    tighter = update(client, child, maker[:15], quota={"requests": 40, "period": "day"})
    assert tighter.status_code == 200, tighter.json


def test_a_rotated_keys_limits_are_its_successors(client, org):
    maker = made(client, org.sdk, quota={"requests": 4, "period": "day"})["key"]
    rotated = rotate(client, org.sdk, maker[:15], grace_seconds=3600)
    assert rotated.status_code == 201, rotated.json
    changed = update(client, org.sdk, maker[:15], quota={"requests": 1000, "period": "day"})
    assert changed.status_code == 409, changed.json
    assert changed.json["code"] == "already_rotated"


@pytest.mark.parametrize("limits", [{}, {"rate_limit": None, "quota": None}])
def test_keys_made_by_a_key_without_limits_are_bound_by_their_own_alone(client, org, limits):
    child = made(client, org.sdk, **limits)["key"]
    grandchild = made(client, child, quota={"requests": 2, "period": "day"})["key"]
    assert [use(client, child).status_code for _ in range(4)] == [204] * 4
    assert [use(client, grandchild).status_code for _ in range(3)] == [204, 204, 429]


def test_a_key_imported_with_a_deleted_makers_identifier_takes_none_of_its_counts(client, org):
    """An identifier is given once: an import naming a deleted maker's is refused, so no key
    can come in under it and take the lineage's counts; the maker's keys keep them."""
    maker = made(client, org.sdk, quota={"requests": 5, "period": "day"})["key"]
    child = made(client, maker)["key"]  # the maker's first use
    assert client.delete(f"/api/keys/{maker[:15]}", auth=(org.sdk, "")).status_code == 204
    entry = {
        "key": "sk_live_" + "q" * 24,
        "identifier": maker[:15],
        "name": "brought",
        "kind": "custom",
        "scopes": ["monitor:read"],
        "quota": {"requests": 1, "period": "day"},
    }
    brought = client.post("/api/keys/import", json={"keys": [entry]}, auth=(org.sdk, ""))
    assert (brought.status_code, brought.json["code"]) == (409, "key_exists"), brought.json
    assert client.get("/api/forward-auth", auth=(entry["key"], "")).status_code == 401
    assert [use(client, child).status_code for _ in range(5)] == [204] * 4 + [429]
