"""Properties of the permission rules (docs/design.md, "Permissions"), over sequences of creates
and updates drawn by hypothesis and sent through the HTTP API to the real database:

- every answer is the one the rules give (201/200, 403, 409 or 422), so that
- no key ever holds a scope that the key which created it, or last changed its scopes,
  lacked at that moment; and
- every key's scopes as stored equal the scopes the API shows.

Each example works in an organization of its own, made at its start: examples share the
test's database but never see each other's keys.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain import keyformat
from app.domain.scopes import ALL, CUSTOM, FIXED, KINDS, SCOPES, TELEMETRY, to_bits, to_names
from app.keys import operator

SCOPE_SETS = st.frozensets(st.sampled_from(SCOPES))
CREATE = st.tuples(st.just("create"), st.integers(0, 63), st.sampled_from(KINDS), SCOPE_SETS)
UPDATE = st.tuples(
    st.just("update"), st.integers(0, 63), st.integers(0, 63), st.none() | SCOPE_SETS
)
OPERATIONS = st.lists(CREATE | UPDATE, min_size=1, max_size=12)
# Keys the operator mints at the start: the callers weaker than the SDK Integration key.
STARTING_SCOPES = st.lists(SCOPE_SETS.filter(bool), min_size=1, max_size=3)

_organizations = itertools.count()


@dataclass
class Known:
    """What the test knows of a key: its value, and the scopes the rules allow it."""

    full_key: str
    identifier: str
    kind: str
    bits: int
    # The scopes of the key that last set this key's scopes, at that moment (the
    # operator, who may grant anything, for the starting keys).
    granted_within: int = ALL


def expected_create(caller: Known, kind: str, bits: int) -> int:
    if caller.kind == TELEMETRY:
        return 403
    if kind == CUSTOM and not bits:
        return 422
    return 201 if not bits & ~caller.bits else 403


def expected_update(caller: Known, target: Known, bits: int | None) -> int:
    new_bits = target.bits if bits is None else bits
    if caller.kind == TELEMETRY:
        return 403
    if target.kind == CUSTOM and not new_bits:
        return 422
    if target.bits & ~caller.bits or new_bits & ~caller.bits:
        return 403
    if target.kind in FIXED and new_bits != target.bits:
        return 409
    return 200


def assert_stored_equals_shown(client, sql, organization: str, known: list[Known]) -> None:
    stored = dict(
        sql(
            "SELECT k.identifier, k.scope_bits FROM api_keys k "
            "JOIN organizations o ON o.id = k.organization_id WHERE o.name = :name",
            name=organization,
        )
    )
    page = client.get("/api/keys?page_size=200", auth=(known[0].full_key, "")).json
    shown = {item["key"].removesuffix("..."): item["scopes"] for item in page["data"]}
    assert shown == {identifier: list(to_names(bits)) for identifier, bits in stored.items()}
    for key in known:
        assert stored[key.identifier] == key.bits
        # The property itself: nothing beyond what the granting key held.
        assert not key.bits & ~key.granted_within, (key, to_names(key.granted_within))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(starting=STARTING_SCOPES, operations=OPERATIONS)
def test_no_sequence_of_creates_and_updates_exceeds_the_callers_scopes(
    app, client, sql, starting, operations
):
    # The example's own organization: the state every example starts from.
    organization = f"property-{next(_organizations)}"
    with app.app_context():
        _, keys = operator.create_organization(organization)
        known = [
            Known(full_key, key.identifier, key.kind, key.scope_bits)
            for key, full_key in sorted(keys, key=lambda pair: pair[0].kind != "sdk_integration")
        ]
        for number, scopes in enumerate(starting):
            data = {"name": f"start {number}", "kind": CUSTOM, "scope_bits": to_bits(scopes)}
            key, full_key = operator.mint_key(organization, data)
            known.append(Known(full_key, key.identifier, CUSTOM, key.scope_bits))

    for step, operation in enumerate(operations):
        if operation[0] == "create":
            _, caller_index, kind, scopes = operation
            caller = known[caller_index % len(known)]
            bits = FIXED.get(kind, to_bits(scopes))
            body = {"name": f"step {step}", "kind": kind}
            if kind == CUSTOM:
                body["scopes"] = sorted(scopes)
            response = client.post("/api/keys", json=body, auth=(caller.full_key, ""))
            assert response.status_code == expected_create(caller, kind, bits), response.json
            if response.status_code == 201:
                made = response.json
                assert made["scopes"] == list(to_names(bits))
                identifier = keyformat.identifier_of(made["key"])
                known.append(Known(made["key"], identifier, kind, bits, caller.bits))
        else:
            _, caller_index, target_index, scopes = operation
            caller = known[caller_index % len(known)]
            target = known[target_index % len(known)]
            body = {"name": f"step {step}"}
            if scopes is not None:
                body["scopes"] = sorted(scopes)
            bits = None if scopes is None else to_bits(scopes)
            expected = expected_update(caller, target, bits)
            response = client.put(
                f"/api/keys/{target.identifier}", json=body, auth=(caller.full_key, "")
            )
            assert response.status_code == expected, response.json
            if expected == 200:
                new_bits = target.bits if bits is None else bits
                assert response.json["scopes"] == list(to_names(new_bits))
                if bits is not None:
                    target.bits, target.granted_within = bits, caller.bits
        assert_stored_equals_shown(client, sql, organization, known)
