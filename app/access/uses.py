"""What one use of a key decided (app/access/limits.py spends it, app/access/policy.py
judges by it): each limit's allowance, the rate limits that bind the key, the quotas the use
was the last of."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class Allowance(NamedTuple):
    """A use of a key under its own limit or quota: allowed or not, how many are left, and
    the whole seconds until the window ends (None: never, a lifetime quota)."""

    allowed: bool
    remaining: int
    reset: int | None


class Rate(NamedTuple):
    """One rate limit a use was counted by: its name in the RateLimit headers ("key",
    "identity", "maker", "maker-2" for its maker's maker...), its figures and its state."""

    name: str
    requests: int
    seconds: int
    allowance: Allowance


class Exhausted(NamedTuple):
    """A quota that this use was the last of, in its period: whose (bindings.KEY,
    bindings.IDENTITY or bindings.MAKER), its counter, and when its period ends (None:
    a lifetime quota)."""

    who: str
    counter: str
    ends: datetime | None


class KeyUse(NamedTuple):
    """One use of a key under every limit that binds it (its own, its makers', its
    identity's): which refused it (RATE, QUOTA; None: all allowed it) and whose it was
    (`limit`: bindings.KEY, MAKER or IDENTITY), the state of each rate limit, the quota
    with the fewest uses left (None: none binds it), the refusing limit's own state, and
    the quotas this use was the last of."""

    refused: str | None
    limit: str | None
    rates: tuple[Rate, ...]
    quota: Allowance | None
    refusing: Allowance | None = None
    exhausted: tuple[Exhausted, ...] = ()
