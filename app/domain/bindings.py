"""The limits that bind a key beyond its own (docs/design.md, "Identities"): those of the keys
that made it, at any depth, and its identity's. Each is a Bound: who set it (a maker or
the identity), the counter its uses spend (a maker's lineage, as its own uses spend it;
the identity's), and its rate limit and quota.

A key made by a key spends its maker's limits as well as its own, and so those of every
key its maker was bound by: what a key stores of its makers (api_keys.bound_by) is its
maker's list and the maker itself, by value, so that a maker deleted keeps binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

# Who set a limit that refused a use: the problem document's `limit`.
KEY = "key"
MAKER = "maker"
IDENTITY = "identity"
# An identity's counters are named apart from a key's lineage (identifiers have no colon).
IDENTITY_COUNTER = "identity:"
# The most makers a key may have (limits or not): a key that would have more is refused
# (403 exceeds_caller), so that a check never spends more than 2 + 2 x 17 counters.
MOST_MAKERS = 16


class Bound(NamedTuple):
    """A limit that binds a key beyond its own: who set it, the counter its uses spend,
    and its rate limit and quota (each None: none)."""

    who: str
    counter: str
    rate_limit_requests: int | None
    rate_limit_seconds: int | None
    quota_requests: int | None
    quota_period: str | None


class Limited(NamedTuple):
    """What a key or an identity has of limits: its counter, rate limit and quota."""

    counter: str
    rate_limit_requests: int | None
    rate_limit_seconds: int | None
    quota_requests: int | None
    quota_period: str | None


def lineage(identifier: str, quota_counter: str | None) -> str:
    """The counter a key's own uses spend: the first key's of its rotations, so that a
    successor takes its predecessor's counts over, and keys bound by it keep spending
    them."""
    return quota_counter or identifier


def identity_counter(public_id: str) -> str:
    return IDENTITY_COUNTER + public_id


def binds(bounds: Sequence[Bound]) -> bool:
    """Whether any of `bounds` has a limit."""
    return any(has_limits(bound) for bound in bounds)


def rated(key: Any) -> bool:
    """Whether a rate limit binds a key (a Caller): its own, or one of `bound_by`'s."""
    return key.rate_limit_requests is not None or any(
        bound.rate_limit_requests is not None for bound in key.bound_by
    )


def has_limits(limited: Any) -> bool:
    return limited.rate_limit_requests is not None or limited.quota_requests is not None


def makers(stored: Sequence[Sequence[Any]] | None) -> tuple[Bound, ...]:
    """The makers' limits as api_keys.bound_by stores them."""
    return tuple(Bound(MAKER, *entry) for entry in stored or ())


def stored(bounds: Iterable[Bound]) -> list[list[Any]]:
    """The makers' limits as api_keys.bound_by stores them: the identity's are read with it."""
    return [list(bound[1:]) for bound in bounds if bound.who == MAKER]


def of_maker(maker: Limited) -> Bound:
    return Bound(MAKER, *maker)


def of_identity(identity: Limited) -> Bound:
    return Bound(IDENTITY, *identity)


def made_by(
    own_counter: str, maker_bounds: Sequence[Bound], maker: Limited | None, kept: Sequence[Bound]
) -> list[Bound] | None:
    """What binds a key of lineage `own_counter` made by a key bound by `maker_bounds`
    whose own limits are `maker` (None: the operator), beside what already bound it
    (`kept`: a rotated key's): its makers', then its maker; each counter once, never its
    own. A maker without limits is kept too, so that limits it is given later bind the
    keys it made. None when that is more than MOST_MAKERS."""
    chosen: dict[str, Bound] = {}
    candidates = [*kept, *(b for b in maker_bounds if b.who == MAKER)]
    if maker is not None:
        candidates.append(of_maker(maker))
    for bound in candidates:
        if bound.counter != own_counter:
            chosen[bound.counter] = bound
    if len(chosen) > MOST_MAKERS:
        return None
    return list(chosen.values())


def changed(bounds: Sequence[Sequence[Any]], limited: Limited) -> list[list[Any]] | None:
    """`bounds` (as stored) with the entry of `limited`'s counter given its limits now;
    None when it has no such entry."""
    if not any(entry[0] == limited.counter for entry in bounds):
        return None
    return [list(limited) if entry[0] == limited.counter else list(entry) for entry in bounds]
