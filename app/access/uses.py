"""What one use of a key decided (app/access/limits.py spends it, app/access/policy.py
judges by it): the counters every limit that binds the key counts in, each limit's
allowance, the rate limits that bind the key, the quotas the use was the last of."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from limits import RateLimitItemPerSecond

from app.access.counting import Counter
from app.access.counting.windows import Spent
from app.domain import bindings, periods
from app.domain.credentials import Caller
from app.domain.timestamps import utcnow

# Where a key's own limit (docs/design.md, "Key policy") and its quota ("Quotas") are counted,
# beside the rates; a KeyUse's refusal names one of them.
OWN = "key"
QUOTA = "quota"
RATE = "rate"


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


class Part(NamedTuple):
    """What one counter of a use counts: whose limit (a Bound), RATE or QUOTA, the rate's
    name or the quota's end, and the quota's whole seconds to its reset."""

    bound: bindings.Bound
    kind: str
    named: str | datetime | None
    reset: int | None


def counters(
    key: Caller,
    rate_key: Callable[[str, int, int], str],
    quota_key: Callable[[str, str], str],
    quotas: bool = True,
) -> tuple[list[Counter], list[Part]]:
    """The counters one use of `key` counts in, rate limits first, and what each counts:
    where a rate limit counts is `rate_key(counter, requests, seconds)`, a quota
    `quota_key(counter, window)` (app/access/limits.py); the rate limits alone for a use
    that spends no quota (not `quotas`: a request that manages keys without making one)."""
    own = bindings.Bound(
        bindings.KEY,
        key.counter,
        key.rate_limit_requests,
        key.rate_limit_seconds,
        key.quota_requests,
        key.quota_period,
    )
    binding = (own, *key.bound_by)
    counters: list[Counter] = []
    parts: list[Part] = []
    makers = 0  # the makers with a rate limit, named "maker", "maker-2"...
    for bound in binding:
        requests, seconds = bound.rate_limit_requests, bound.rate_limit_seconds
        if requests is not None and seconds is not None:
            item = RateLimitItemPerSecond(requests, seconds)
            makers += bound.who == bindings.MAKER
            name = (
                bound.who
                if makers < 2 or bound.who != bindings.MAKER
                else f"{bindings.MAKER}-{makers}"
            )
            counters.append(
                Counter(rate_key(bound.counter, requests, seconds), item.get_expiry(), requests)
            )
            parts.append(Part(bound, RATE, name, None))
    now = None
    for bound in binding if quotas else ():
        if bound.quota_requests is not None and bound.quota_period is not None:
            now = now or utcnow()
            window = periods.window(bound.quota_period, now)
            left = periods.seconds_left(window.end, now)
            name = quota_key(bound.counter, window.name)
            counters.append(Counter(name, left, bound.quota_requests))
            reset = None if window.end is None else max(1, math.ceil(left))
            parts.append(Part(bound, QUOTA, window.end, reset))
    return counters, parts


def decided(counters: list[Counter], parts: list[Part], spent: Spent) -> KeyUse:
    """What a use decided, from what each of its counters counted (`spent`)."""
    allowed = spent.refused is None
    rates: list[Rate] = []
    quota = refusing = None
    exhausted: list[Exhausted] = []
    for index, (bound, kind, named, reset) in enumerate(parts):
        counter, count = counters[index], spent.counts[index]
        remaining = max(0, counter.limit - count)
        if kind == RATE:
            allowance = Allowance(allowed, remaining, seconds_until(spent.ends[index]))
            seconds = bound.rate_limit_seconds or 0
            rates.append(Rate(str(named), counter.limit, seconds, allowance))
        else:
            allowance = Allowance(allowed, remaining, reset)
            if quota is None or remaining < quota.remaining:
                quota = allowance
            if allowed and count == counter.limit:
                ends = named if isinstance(named, datetime) else None
                exhausted.append(Exhausted(bound.who, bound.counter, ends))
        if index == spent.refused:
            refusing = allowance
    if allowed:
        return KeyUse(None, None, tuple(rates), quota, None, tuple(exhausted))
    bound, kind, _, _ = parts[spent.refused or 0]
    return KeyUse(kind, bound.who, tuple(rates), quota, refusing)


def seconds_until(moment: float) -> int:
    """Whole seconds until `moment` (Unix seconds), at least 1."""
    return max(1, math.ceil(moment - time.time()))
