"""The abuse limits (CONTRACT.md section 8), counted with the `limits` library:

- failed authentications per client address (RATELIMIT_AUTH_FAILURES): once an address
  has failed that often in the period, its requests get 429 until the period ends, valid
  keys included, so that guessing cannot go on;
- requests per key (RATELIMIT_PER_KEY): counted once the key is found, so that nobody can
  spend another key's allowance by naming its public identifier.

The counts live where RATELIMIT_STORAGE_URI says (app/access/counting: this host's file,
shared by every worker, by default; Redis, shared by every host). A storage that does not
answer is no reason to refuse requests: each worker then counts in its own memory, says so
once in the log, and asks the storage again every RETRY_SECONDS. Only the storage's own
errors switch over, never a client's request.
"""

from __future__ import annotations

import math
import time
from datetime import datetime
from typing import NamedTuple

from flask import Flask, current_app
from limits import RateLimitItem, RateLimitItemPerSecond, parse
from limits.storage import Storage

from app.access import counting
from app.access.counting import Counter
from app.domain import bindings, periods
from app.domain.addresses import client_address
from app.domain.credentials import Caller
from app.domain.timestamps import utcnow
from app.http.errors import RETRY_SHORTLY, ApiError
from app.serving import metrics

AUTH_FAILURES = "RATELIMIT_AUTH_FAILURES"
PER_KEY = "RATELIMIT_PER_KEY"
# Forward auth and introspection: other services check a key on each request they serve.
INTROSPECT = "RATELIMIT_INTROSPECT"
RATES = (AUTH_FAILURES, PER_KEY, INTROSPECT)
# Where a key's own limit (CONTRACT.md section 15) and its quota (section 21) are counted,
# beside the rates; a KeyUse's refusal names one of them.
OWN = "key"
QUOTA = "quota"
RATE = "rate"
RETRY_SECONDS = 10.0
# Where the application keeps what records a quota used up, called with the caller and the
# Exhausted of its use (app/webhooks/announcements.py sets it; authentication calls it).
EXHAUSTED = "quota_exhausted"
MESSAGES = {
    AUTH_FAILURES: "Too many failed authentications from this address; retry later.",
    PER_KEY: "Too many requests with this key; retry later.",
    INTROSPECT: "Too many checks of this key; retry later.",
}


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


def _reset(seconds: float) -> int:
    """Whole seconds until a quota's calendar window ends, `seconds` away."""
    return max(1, math.ceil(seconds))


def counter_key(item: RateLimitItem, prefix: str, name: str) -> tuple[str, str]:
    """The counter key of `item` for an identifier under `name`, as the two strings around
    the identifier: `limits`' own key (RateLimitItem.key_for), built once, not per request
    (tests/test_limits.py checks they match)."""
    around = item.key_for(prefix, name, "\0").split("\0")
    return around[0], around[1]


class Limits:
    """One application's limits, in app.extensions["limits"]: fixed windows counted in
    `limits`' storage, as its FixedWindowRateLimiter counts them, with counter keys made
    once per rate (the limiter builds each from ten conversions, bench/README.md)."""

    def __init__(self, app: Flask) -> None:
        config = app.config
        self.enabled: bool = config["RATELIMIT_ENABLED"]
        self.prefix: str = config["RATELIMIT_KEY_PREFIX"]
        self.rates: dict[str, RateLimitItem] = {name: parse(config[name]) for name in RATES}
        self.keys = {
            name: counter_key(item, self.prefix, name) for name, item in self.rates.items()
        }
        self.fallback_enabled: bool = config["RATELIMIT_IN_MEMORY_FALLBACK_ENABLED"]
        self.logger = app.logger
        options = config.get("RATELIMIT_STORAGE_OPTIONS", {})
        self.storage = counting.storage(config["RATELIMIT_STORAGE_URI"], options, app.instance_path)
        self.fallback: Storage | None = None  # while the storage is silent
        self.retry_at = 0.0

    def allowed(self, rate: str, identifier: str) -> bool:
        """One use of `rate` counted for `identifier`: whether it had some left, as
        `limits`' FixedWindowRateLimiter.hit decides."""
        item = self.rates[rate]
        head, tail = self.keys[rate]
        key = head + identifier + tail
        try:
            count = self._storage().incr(key, item.get_expiry())
        except self.storage.base_exceptions:
            count = self._fall_back().incr(key, item.get_expiry())
        return count <= item.amount

    def give_back(self, rate: str, identifier: str) -> None:
        """One use of `rate` counted for `identifier` in its current window, taken back."""
        head, tail = self.keys[rate]
        key = head + identifier + tail
        try:
            counting.give_back(self._storage(), key)
        except self.storage.base_exceptions:
            counting.give_back(self._fall_back(), key)

    def forgive_and_count(self, address: str, rate: str, identifier: str) -> bool:
        """The attempt counted for `address` given back and one request of `identifier`
        counted against `rate`, in one operation (counting.exchange): whether `rate` had
        some left."""
        head, tail = self.keys[AUTH_FAILURES]
        back = head + address + tail
        head, tail = self.keys[rate]
        key = head + identifier + tail
        item = self.rates[rate]
        try:
            count = counting.exchange(self._storage(), back, key, item.get_expiry())
        except self.storage.base_exceptions:
            count = counting.exchange(self._fall_back(), back, key, item.get_expiry())
        return count <= item.amount

    def rate_key(self, counter: str, requests: int, seconds: int) -> str:
        """Where the rate limit of `counter` (a key's lineage, an identity) counts."""
        return RateLimitItemPerSecond(requests, seconds).key_for(self.prefix, OWN, counter)

    def spend_key(self, key: Caller) -> KeyUse:
        """One use of `key` under every limit that binds it (bindings: its own, its makers',
        its identity's), counted by all or by none (app/access/counting's spend), rate
        limits first: counted whether the abuse limits are on or not, since its owner asked
        for them."""
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
        # Each counter's (who, RATE or QUOTA, the Rate's name or the quota's end, its reset).
        parts: list[tuple[bindings.Bound, str, str | datetime | None, int | None]] = []
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
                    Counter(
                        self.rate_key(bound.counter, requests, seconds), item.get_expiry(), requests
                    )
                )
                parts.append((bound, RATE, name, None))
        now = None
        for bound in binding:
            if bound.quota_requests is not None and bound.quota_period is not None:
                now = now or utcnow()
                window = periods.window(bound.quota_period, now)
                left = periods.seconds_left(window.end, now)
                name = self.quota_key(bound.counter, window.name)
                counters.append(Counter(name, left, bound.quota_requests))
                parts.append(
                    (bound, QUOTA, window.end, None if window.end is None else _reset(left))
                )
        try:
            spent = counting.spend(self._storage(), counters)
        except self.storage.base_exceptions:
            spent = counting.spend(self._fall_back(), counters)
        allowed = spent.refused is None
        rates: list[Rate] = []
        quota = refusing = None
        exhausted: list[Exhausted] = []
        for index, (bound, kind, named, reset) in enumerate(parts):
            counter, count = counters[index], spent.counts[index]
            remaining = max(0, counter.limit - count)
            if kind == RATE:
                allowance = Allowance(allowed, remaining, _seconds_until(spent.ends[index]))
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

    def count(self, key: str) -> int:
        """The count of `key` in its current window (0: none)."""
        try:
            return self._storage().get(key)
        except self.storage.base_exceptions:
            return self._fall_back().get(key)

    def add_count(self, key: str, expiry: float, amount: int) -> None:
        """`amount` added to `key`'s count, at once (a new window of `expiry` seconds)."""
        try:
            self._storage().incr(key, math.ceil(expiry), amount)
        except self.storage.base_exceptions:
            self._fall_back().incr(key, math.ceil(expiry), amount)

    def set_count(self, key: str, expiry: float, count: int) -> None:
        """`key`'s count made `count` (a new window of `expiry` seconds when it has none)."""
        try:
            counting.set_count(self._storage(), key, expiry, count)
        except self.storage.base_exceptions:
            counting.set_count(self._fall_back(), key, expiry, count)

    def quota_key(self, counter: str, window: str) -> str:
        """Where the quota of the keys of `counter` (app/quotas) counts in `window`."""
        return f"{self.prefix}/{QUOTA}/{counter}/{window}"

    def refusal(self, rate: str, identifier: str) -> ApiError:
        """429 with the whole seconds until `identifier`'s `rate` lets it through again."""
        head, tail = self.keys[rate]
        retry_after = _seconds_until(self._storage().get_expiry(head + identifier + tail))
        metrics.limit_refused(rate)
        return ApiError(
            429, "rate_limited", MESSAGES[rate], headers=[("Retry-After", str(retry_after))]
        )

    def _storage(self) -> Storage:
        """The storage, or the memory while the storage is silent."""
        if self.fallback is None:
            return self.storage
        if time.monotonic() >= self.retry_at:
            if self.storage.check():
                self.fallback = None
                self.logger.warning("Rate limit storage answers again: counting there.")
                return self.storage
            self.retry_at = time.monotonic() + RETRY_SECONDS
        return self.fallback

    def _fall_back(self) -> Storage:
        if not self.fallback_enabled:
            raise ApiError(
                503,
                "unavailable",
                "The abuse limits' storage does not answer; retry shortly.",
                headers=[RETRY_SHORTLY],
            )
        if self.fallback is None:
            self.logger.warning(
                "Rate limit storage unreachable - falling back to in-memory storage"
            )
            self.fallback = counting.MemoryCounts()
        self.retry_at = time.monotonic() + RETRY_SECONDS
        return self.fallback


def _seconds_until(moment: float) -> int:
    return max(1, math.ceil(moment - time.time()))


def init_app(app: Flask) -> None:
    app.extensions["limits"] = Limits(app)


def _limits() -> Limits | None:
    limits: Limits = current_app.extensions["limits"]
    return limits if limits.enabled else None


def attempt() -> None:
    """One attempt to authenticate from this request's address, counted before its key is
    looked up, so that of any number sent at once no more than the limit are tried; 429
    once they are spent. A valid key gives its attempt back (forgive_and_count(), forgive())."""
    limits = _limits()
    if limits and not limits.allowed(AUTH_FAILURES, address := client_address()):
        raise limits.refusal(AUTH_FAILURES, address)


def forgive() -> None:
    """This request's attempt was no failed authentication: its count is given back."""
    if limits := _limits():
        limits.give_back(AUTH_FAILURES, client_address())


def forgive_and_count(identifier: str, rate: str = PER_KEY) -> None:
    """A request of the valid key `identifier`: this request's attempt given back, as
    forgive() does, and one request of the key counted, in one operation on the counts;
    429 past `rate` (a configuration key)."""
    limits = _limits()
    if limits and not limits.forgive_and_count(client_address(), rate, identifier):
        raise limits.refusal(rate, identifier)


def spend_key(key: Caller) -> KeyUse:
    """One use of `key` under its own rate limit and quota (it has one or both)."""
    limits: Limits = current_app.extensions["limits"]
    return limits.spend_key(key)
