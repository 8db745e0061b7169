"""The abuse limits (CONTRACT.md section 8), counted with the `limits` library:

- failed authentications per client address (RATELIMIT_AUTH_FAILURES): once an address
  has failed that often in the period, its requests get 429 until the period ends, valid
  keys included, so that guessing cannot go on;
- requests per key (RATELIMIT_PER_KEY): counted once the key is found, so that nobody can
  spend another key's allowance by naming its public identifier.

The counts live in RATELIMIT_STORAGE_URI (each worker's memory, or Redis shared by every
worker and host). A storage that does not answer is no reason to refuse requests: each
worker then counts in its own memory, says so once in the log, and asks the storage again
every RETRY_SECONDS. Only the storage's own errors switch over, never a client's request.
"""

from __future__ import annotations

import math
import threading
import time
from typing import NamedTuple

from flask import Flask, current_app
from limits import RateLimitItem, RateLimitItemPerSecond, parse
from limits.storage import MemoryStorage, Storage, storage_from_string

from app import metrics
from app.addresses import client_address
from app.errors import RETRY_SHORTLY, ApiError

AUTH_FAILURES = "RATELIMIT_AUTH_FAILURES"
PER_KEY = "RATELIMIT_PER_KEY"
# Forward auth and introspection: other services check a key on each request they serve.
INTROSPECT = "RATELIMIT_INTROSPECT"
RATES = (AUTH_FAILURES, PER_KEY, INTROSPECT)
# Where a key's own limit (CONTRACT.md section 15) is counted, beside the rates.
OWN = "key"
RETRY_SECONDS = 10.0
# How often a worker's memory drops the counters whose period has ended.
SWEEP_SECONDS = 10.0
MESSAGES = {
    AUTH_FAILURES: "Too many failed authentications from this address; retry later.",
    PER_KEY: "Too many requests with this key; retry later.",
    INTROSPECT: "Too many checks of this key; retry later.",
}


class Allowance(NamedTuple):
    """A use of a key under its own limit: allowed or not, how many are left, and the
    whole seconds until the window ends."""

    allowed: bool
    remaining: int
    reset: int


class MemoryCounts(MemoryStorage):
    """`limits`' memory storage for the fixed windows, without its timer thread: after each
    sweep of expired counters MemoryStorage starts a new thread 10 ms later, so under load
    a worker started a thread every few requests (bench/README.md). Here the request that
    finds a sweep due does it, at most every SWEEP_SECONDS, under one lock."""

    def __init__(self) -> None:
        super().__init__()
        self.timer.cancel()  # started by MemoryStorage.__init__
        self.lock = threading.Lock()
        self.sweep_at = 0.0

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        now = time.time()
        with self.lock:
            if now >= self.sweep_at:
                self._sweep(now)
            if self.expirations.get(key, 0) <= now:  # a new period
                self.storage[key] = 0
                self.expirations[key] = now + expiry
            self.storage[key] += amount
            return self.storage[key]

    def _sweep(self, now: float) -> None:
        for key in [key for key, ends in self.expirations.items() if ends <= now]:
            self.storage.pop(key, None)
            del self.expirations[key]
        self.sweep_at = now + SWEEP_SECONDS


def storage(uri: str, options: dict) -> Storage:
    """Where the counts live: each worker's memory (memory://) or a shared server."""
    if uri.split(":", 1)[0] == "memory":
        return MemoryCounts()
    return storage_from_string(uri, **options)


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
        self.storage = storage(config["RATELIMIT_STORAGE_URI"], options)
        self.fallback: Storage | None = None  # while the storage is silent
        self.retry_at = 0.0

    def allowed(self, rate: str, identifier: str, count: bool) -> bool:
        """Whether `identifier` has some of `rate` left; `count` spends one."""
        item = self.rates[rate]
        head, tail = self.keys[rate]
        key = head + identifier + tail
        try:
            return _allowed(self._storage(), item, key, count)
        except self.storage.base_exceptions:
            return _allowed(self._fall_back(), item, key, count)

    def spend(self, item: RateLimitItem, identifier: str) -> Allowance:
        """One use of the key `identifier` under its own limit `item` (app/policy.py):
        counted whether the abuse limits are on or not, since its owner asked for it."""
        key = item.key_for(self.prefix, OWN, identifier)

        def hit(counts: Storage) -> Allowance:
            allowed = _allowed(counts, item, key, count=True)
            remaining = max(0, item.amount - counts.get(key))
            return Allowance(allowed, remaining, _seconds_until(counts.get_expiry(key)))

        try:
            return hit(self._storage())
        except self.storage.base_exceptions:
            return hit(self._fall_back())

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
            self.fallback = MemoryCounts()
        self.retry_at = time.monotonic() + RETRY_SECONDS
        return self.fallback


def _allowed(counts: Storage, item: RateLimitItem, key: str, count: bool) -> bool:
    """FixedWindowRateLimiter's hit (`count`) or test, on a key already built."""
    if count:
        return counts.incr(key, item.get_expiry()) <= item.amount
    return counts.get(key) < item.amount


def _seconds_until(moment: float) -> int:
    return max(1, math.ceil(moment - time.time()))


def init_app(app: Flask) -> None:
    app.extensions["limits"] = Limits(app)


def _limits() -> Limits | None:
    limits: Limits = current_app.extensions["limits"]
    return limits if limits.enabled else None


def check_address() -> None:
    """429 for an address whose failed authentications are spent."""
    limits = _limits()
    if limits and not limits.allowed(AUTH_FAILURES, address := client_address(), count=False):
        raise limits.refusal(AUTH_FAILURES, address)


def count_failure() -> None:
    """One failed authentication of this request's address (refused anyway: the next
    request of the address meets the limit)."""
    if limits := _limits():
        limits.allowed(AUTH_FAILURES, client_address(), count=True)


def count_use(identifier: str, rate: str = PER_KEY) -> None:
    """One request of the key `identifier`; 429 past `rate` (a configuration key)."""
    limits = _limits()
    if limits and not limits.allowed(rate, identifier, count=True):
        raise limits.refusal(rate, identifier)


def spend_own(identifier: str, requests: int, seconds: int) -> Allowance:
    """One use of the key `identifier` under its own limit of `requests` per `seconds`."""
    limits: Limits = current_app.extensions["limits"]
    return limits.spend(RateLimitItemPerSecond(requests, seconds), identifier)
