"""Never more than the caller (docs/design.md, "Permissions", "Key policy"): what a key may give a
key it creates, updates or rotates, itself included, of scopes, place, time, rate and quota
("Promises kept by default", "Quotas").

Each bounded field of a key's policy is a `Bound`: where the caller has one, a value that a
body names must lie within it (else 403 `exceeds_caller` naming the field), and a key that
the caller creates or rotates takes the caller's value wherever its own would not lie
within (none named, or the rotated key's own). Another bounded field is one more `Bound`
in BOUNDS, and one more member of `Held`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from app.domain import bindings
from app.domain.bindings import Bound as Binding
from app.domain.credentials import Caller
from app.domain.scopes import exceeding, to_names
from app.domain.timestamps import from_iso, iso
from app.http.errors import ApiError, invalid
from app.serving import verdicts
from app.storage import identity_reads
from app.storage.identity_reads import HeldBy
from app.storage.queries import Key


class Held(NamedTuple):
    """What a key holds, as these rules compare it: its scopes, and each bounded field as
    the API names it (None, or no addresses: no bound)."""

    scope_bits: int
    allowed_ips: Sequence[str]
    expires_at: datetime | None
    rate_limit: dict[str, int] | None
    quota: dict[str, Any] | None = None


def held_by(caller: Caller) -> Held:
    """What the caller held when its request was authenticated."""
    rate_limit = None
    if caller.rate_limit_requests is not None:
        rate_limit = {"requests": caller.rate_limit_requests, "seconds": caller.rate_limit_seconds}
    quota = None
    if caller.quota_requests is not None:
        quota = {"requests": caller.quota_requests, "period": caller.quota_period}
    return Held(caller.scope_bits, caller.allowed_ips, caller.expires_at, rate_limit, quota)


def judging(caller: Caller, key: Key) -> Held:
    """What a change of `key` (as locked in the change's transaction) is judged by: the
    caller's holdings, or, when `key` is the caller itself, what it holds now, so that a
    request authenticated before another narrowed the key cannot widen it back."""
    if key.identifier != caller.identifier:
        return held_by(caller)
    expires_at = None if key.expires_at is None else from_iso(key.expires_at)
    return Held(key.scope_bits, key.allowed_ips, expires_at, key.rate_limit, key.quota)


def refused(caller: Caller, refusal: ApiError) -> ApiError:
    """`refusal` of the request's own key by a rule of the service after its door let it
    through (`forbidden`, `scope_exceeds_caller`): its use counted as that refusal."""
    verdicts.refused(caller.id, refusal.problem_code)
    return refusal


# --- scopes (section 3): their own refusals -------------------------------------------------


def require_power_over(caller: Caller, held: Held, key: Key) -> None:
    """A key may alter or revoke only keys whose scopes it holds all of: else 403
    `forbidden`."""
    if exceeding(key.scope_bits, held.scope_bits):
        raise refused(
            caller, ApiError(403, "forbidden", "This key holds scopes the calling key lacks.")
        )


def require_scopes(caller: Caller, held: Held, scope_bits: int) -> None:
    """A key gets no scope its caller lacks: else 403 `scope_exceeds_caller`, naming them."""
    excess = exceeding(scope_bits, held.scope_bits)
    if excess:
        names = ", ".join(to_names(excess))
        raise refused(
            caller,
            ApiError(
                403,
                "scope_exceeds_caller",
                f"These scopes exceed the calling key's own: {names}.",
                {"scopes": [f"Not held by the calling key: {names}."]},
            ),
        )


# --- place, time, rate and quota (sections 15, 20 and 21) ---------------------------------


class Bound(NamedTuple):
    """One bounded field: whether a value (None included) gives no more than the caller's
    own, and the sentence that refuses one that does."""

    field: str
    within: Callable[[Any, Any], bool]
    refusal: Callable[[Any], str]


def _inside(entries: Sequence[str] | None, own: Sequence[str]) -> bool:
    """Some addresses, each network inside one of `own`."""
    networks = [ipaddress.ip_network(network) for network in own]
    return bool(entries) and all(
        any(entry.version == mine.version and entry.subnet_of(mine) for mine in networks)
        for entry in map(ipaddress.ip_network, entries)
    )


def _no_later(expires_at: datetime | None, own: datetime) -> bool:
    return expires_at is not None and expires_at <= own


def _no_faster(limit: dict[str, int] | None, own: dict[str, int]) -> bool:
    """No more uses in a window, and no more per second: r <= R and r/s <= R/S."""
    if limit is None:
        return False
    requests, seconds = limit["requests"], limit["seconds"]
    return requests <= own["requests"] and requests * own["seconds"] <= own["requests"] * seconds


def _no_more_uses(quota: dict[str, Any] | None, own: dict[str, Any]) -> bool:
    """The same period, and no more requests in it."""
    return (
        quota is not None
        and quota["period"] == own["period"]
        and (quota["requests"] <= own["requests"])
    )


BOUNDS = (
    Bound(
        "allowed_ips",
        _inside,
        lambda own: (
            "The calling key is limited to some addresses: a key it makes or changes "
            "must be limited to addresses inside them."
        ),
    ),
    Bound(
        "expires_at",
        _no_later,
        lambda own: (
            f"The calling key expires at {iso(own)}: a key it makes or changes must "
            "expire no later."
        ),
    ),
    Bound(
        "rate_limit",
        _no_faster,
        lambda own: (
            f"The calling key is limited to {own['requests']} uses per "
            f"{own['seconds']} seconds: a key it makes or changes must be limited to no more "
            "uses per window, and no more per second."
        ),
    ),
    Bound(
        "quota",
        _no_more_uses,
        lambda own: (
            f"The calling key has a quota of {own['requests']} uses per {own['period']}: a "
            "key it makes or changes must have a quota of the same period, with no more uses."
        ),
    ),
)


def require_within(held: Held, data: dict) -> None:
    """Every bounded field that `data` names lies within what the caller holds: else 403
    `exceeds_caller`, naming each field beyond it."""
    errors = {
        bound.field: [bound.refusal(own)]
        for bound in BOUNDS
        if (own := getattr(held, bound.field))
        and bound.field in data
        and not bound.within(data[bound.field], own)
    }
    if errors:
        detail = " ".join(message for [message] in errors.values())
        raise ApiError(403, "exceeds_caller", detail, errors)


def inherited(held: Held, policy: dict[str, Any]) -> dict[str, Any]:
    """`policy` (the bounded fields a new key or a successor would get) with the caller's
    value in place of each one that does not lie within it."""
    return policy | {
        bound.field: own
        for bound in BOUNDS
        if (own := getattr(held, bound.field)) and not bound.within(policy.get(bound.field), own)
    }


def require_not_own_quota(caller: Caller, key: Key) -> None:
    """No key grants uses to the quota it spends itself (its own, or one it took over by a
    rotation): 403 `exceeds_caller` naming `quota`."""
    spent = {caller.counter} | {bound.counter for bound in caller.bound_by}
    if key.counter in spent:
        message = "A key cannot grant uses to a quota it spends itself (its own or a maker's)."
        raise ApiError(403, "exceeds_caller", message, {"quota": [message]})


# --- identity and makers (section 23) -----------------------------------------------------

UNKNOWN_IDENTITY = "No identity of your organization has this id or external_id."
STAYS_IN_IDENTITY = (
    "The calling key belongs to an identity: a key it makes or rotates belongs to the same "
    "identity."
)
MAY_NOT_SET_IDENTITY = (
    "Only a key that belongs to no identity, and was not made by a key with limits, may set "
    "or change a key's identity."
)
TOO_DEEP = (
    f"A key may be made at most {bindings.MOST_MAKERS} generations below a key the operator "
    "made: this one would be more. Make it with a key made by fewer keys."
)
LIMITS_OF_A_MAKER = (
    "A key cannot loosen the limits of a key that made it, which bind it too: it may "
    "narrow them only."
)
LIMITS_OF_ITS_IDENTITY = (
    "A key that belongs to an identity, or was made by a key with limits, cannot change an "
    "identity's limits."
)


def _beyond(message: str, field: str = "identity") -> ApiError:
    return ApiError(403, "exceeds_caller", message, {field: [message]})


def _makers(caller: Caller) -> bool:
    """Whether the caller is bound by the limits of a key that made it."""
    return any(bound.who == bindings.MAKER for bound in caller.bound_by)


def identity_of_made(caller: Caller, data: dict, kept: HeldBy | None = None) -> HeldBy | None:
    """The identity of a key the caller makes (or rotates: `kept`, the old key's): the
    caller's own, when it has one (naming another, or none: 403 `exceeds_caller` naming
    `identity`); else the one `data` names (422 when the organization has none such), which
    only a caller bound by no maker may name (403)."""
    if caller.identity is not None:
        own = HeldBy(caller.identity_id or 0, caller.identity)
        if "identity" in data and (
            data["identity"] is None or named_identity(caller, data["identity"]) != own
        ):
            raise _beyond(STAYS_IN_IDENTITY)
        return own
    if data.get("identity") is None:
        return kept
    if _makers(caller):
        raise _beyond(MAY_NOT_SET_IDENTITY)
    return named_identity(caller, data["identity"])


def require_no_looser_maker(caller: Caller, key: Key, data: dict) -> None:
    """A key changing a key that made it (at any depth) may only narrow its limits, which
    bind the caller too: else 403 `exceeds_caller` naming the field."""
    if key.counter not in {bound.counter for bound in caller.bound_by}:
        return
    current = Held(0, (), None, key.rate_limit, key.quota)
    try:
        require_within(current, data)
    except ApiError as refusal:
        fields = list(refusal.errors or {})
        raise ApiError(
            403, "exceeds_caller", LIMITS_OF_A_MAKER, {f: [LIMITS_OF_A_MAKER] for f in fields}
        ) from None


def require_may_change_identity_limits(caller: Caller, data: dict) -> None:
    """An identity's limits are changed only by a caller bound by nothing: else 403."""
    named = [field for field in ("rate_limit", "quota") if field in data]
    if named and (caller.identity is not None or _makers(caller)):
        raise ApiError(
            403,
            "exceeds_caller",
            LIMITS_OF_ITS_IDENTITY,
            {f: [LIMITS_OF_ITS_IDENTITY] for f in named},
        )


def require_may_change_identity(caller: Caller) -> None:
    """A key's identity is set or changed only by a caller bound by nothing: else 403."""
    if caller.identity is not None or _makers(caller):
        raise _beyond(MAY_NOT_SET_IDENTITY)


def named_identity(caller: Caller, reference: str) -> HeldBy:
    """The caller's organization's identity `reference` names, locked for the key the
    caller writes with it (identity_reads.identity_named): 422 naming `identity` else, as when
    its delete commits before this read, or while this read waits for it."""
    held = identity_reads.identity_named(caller.organization_id, reference, lock=True)
    if held is None:
        raise invalid({"identity": [UNKNOWN_IDENTITY]})
    return held


def binding_of_made(
    caller: Caller, own_counter: str, kept: Sequence[Binding] = ()
) -> list[Binding]:
    """The makers' limits a key the caller makes is bound by (a rotated key's `kept`
    beside them): the caller's, and the caller itself when it has limits of its own; 403
    `exceeds_caller` past bindings.MOST_MAKERS."""
    maker = bindings.Limited(
        caller.counter,
        caller.rate_limit_requests,
        caller.rate_limit_seconds,
        caller.quota_requests,
        caller.quota_period,
    )
    bound = bindings.made_by(own_counter, caller.bound_by, maker, kept)
    if bound is None:
        raise _beyond(TOO_DEEP, "bound_by")
    return bound
