"""The abuse limits (docs/design.md, "Abuse limits"), counted with the `limits` library:

- failed authentications per client address (RATELIMIT_AUTH_FAILURES): once an address
  has failed that often in the period, its requests get 429 until the period ends, valid
  keys included, so that guessing cannot go on;
- requests per key (RATELIMIT_PER_KEY): counted once the key is found, so that nobody can
  spend another key's allowance by naming its public identifier.

The counts live where RATELIMIT_STORAGE_URI says (app/access/counting: this host's file,
shared by every worker, by default; Redis, shared by every host). A Redis that does not
answer is no reason to refuse every request (docs/design.md, "Many hosts", Redis down): the rate
limits and abuse limits are then counted in this host's file (RATELIMIT_FALLBACK_STORAGE_URI,
shared by its workers: at most one limit per host while it lasts), while a use that would
spend a quota is refused with 503 `counts_unavailable`, since a quota counted afresh on each
host would be renewed by the outage. Each worker asks Redis again every RETRY_SECONDS, and
says in the log once a minute that it does not answer; the counts of the host's file are
not carried into Redis when it answers again, and Redis's own continue. Only the storage's
own errors switch over, never a client's request. A Redis that answers without its data
renews no quota either: the quotas' counts are rebuilt from the database first
(app/access/rebuild.py), their uses refused with the same 503 meanwhile.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

from flask import Flask, current_app
from limits import RateLimitItem, RateLimitItemPerSecond, parse
from limits.storage import Storage

from app.access import counting, rebuild, uses
from app.access.uses import OWN, QUOTA, KeyUse
from app.domain.addresses import client_address
from app.domain.credentials import Caller
from app.http.errors import RETRY_SHORTLY, ApiError
from app.serving import hosts, metrics

AUTH_FAILURES = "RATELIMIT_AUTH_FAILURES"
PER_KEY = "RATELIMIT_PER_KEY"
# Forward auth and introspection: other services check a key on each request they serve.
INTROSPECT = "RATELIMIT_INTROSPECT"
RATES = (AUTH_FAILURES, PER_KEY, INTROSPECT)
RETRY_SECONDS = 10.0
# Seconds between two log lines of one worker that names an outage of the storage.
WARN_SECONDS = 60.0
OK = rebuild.OK
DEGRADED = "degraded"
# Where the application keeps what records a quota used up, called with the caller and the
# Exhausted of its use (app/webhooks/announcements.py sets it; authentication calls it).
EXHAUSTED = "quota_exhausted"
T = TypeVar("T")
MESSAGES = {
    AUTH_FAILURES: "Too many failed authentications from this address; retry later.",
    PER_KEY: "Too many requests with this key; retry later.",
    INTROSPECT: "Too many checks of this key; retry later.",
}


class CountsUnavailable(ApiError):
    """503 `counts_unavailable`: a quota's count asked for while Redis, which alone holds
    it, does not answer."""


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
        self.generation_key = f"{self.prefix}/{counting.GENERATION}"
        self.rates: dict[str, RateLimitItem] = {name: parse(config[name]) for name in RATES}
        self.keys = {
            name: counter_key(item, self.prefix, name) for name, item in self.rates.items()
        }
        self.fallback_enabled: bool = config["RATELIMIT_IN_MEMORY_FALLBACK_ENABLED"]
        self.logger = app.logger
        options = config.get("RATELIMIT_STORAGE_OPTIONS", {})
        self.storage_uri: str = config["RATELIMIT_STORAGE_URI"]
        self.storage = counting.storage(self.storage_uri, options, app.instance_path)
        self.fallback_uri: str = config["RATELIMIT_FALLBACK_STORAGE_URI"]
        self.instance_path = app.instance_path
        # A storage of this host only (its file, memory) has no outage to fall back from.
        self.shared = not isinstance(self.storage, counting.HostCounts | counting.MemoryCounts)
        self.host_counts: Storage | None = None  # this host's file, opened at the first outage
        self.fallback: Storage | None = None  # while the storage is silent
        self.retry_at = 0.0
        self.warned_at = 0.0
        # Where Redis keeps the mark of the quotas' counts (counting.MARK), and what
        # rebuilds them when it has lost them.
        self.mark = f"{self.prefix}/{counting.MARK}"
        self.rebuilder = rebuild.Rebuilder(self.storage, self.mark, self.quota_key, self.logger)

    def attempt(self, address: str) -> tuple[bool, int | None]:
        """One attempt to authenticate counted for `address`: whether it had some left, as
        `limits`' FixedWindowRateLimiter.hit decides, and the generation of what the checks
        read (None: unknown), read with it (one round trip to Redis)."""
        item = self.rates[AUTH_FAILURES]
        head, tail = self.keys[AUTH_FAILURES]
        key = head + address + tail
        try:
            count, generation = counting.attempt(
                self._storage(), key, item.get_expiry(), self.generation_key
            )
        except self.storage.base_exceptions:
            count, generation = self._fall_back().incr(key, item.get_expiry()), None
        return count <= item.amount, self._known(generation)

    def generation(self) -> int | None:
        """The generation of what the checks read (app/access/seen.py), where the counts
        live; None while that storage does not answer, or keeps none."""
        try:
            return self._known(counting.generation(self._storage(), self.generation_key))
        except self.storage.base_exceptions:
            return None

    def _known(self, generation: int | None) -> int | None:
        """`generation`, unless it was read from this host's file while the shared storage
        is silent (the other hosts' writes bump it in the shared one)."""
        return None if self.fallback is not None else generation

    def bump(self) -> bool:
        """The next generation where the counts live, after a commit that changed what a
        check reads: whether the storage took it. Asked even while this worker counts in
        its file: the write's answer waits for it (app/access/seen.py)."""
        try:
            counting.bump(self.storage, self.generation_key)
        except self.storage.base_exceptions:
            return False
        return True

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

    def spend_key(self, key: Caller, quotas: bool = True) -> KeyUse:
        """One use of `key` under every limit that binds it (bindings: its own, its makers',
        its identity's; its rate limits alone when not `quotas`), counted by all or by none
        (app/access/counting's spend), rate limits first: counted whether the abuse limits
        are on or not, since its owner asked for them."""
        counters, parts = uses.counters(key, self.rate_key, self.quota_key, quotas)
        quota_bound = any(part.kind == QUOTA for part in parts)
        storage = self._storage()
        if quota_bound and storage is self.fallback:
            raise self.counts_unavailable()
        mark = self.mark if quota_bound else None
        try:
            try:
                spent = counting.spend(storage, counters, mark)
            except counting.Lost:
                spent = self._rebuilt_then(lambda: counting.spend(storage, counters, mark))
        except self.storage.base_exceptions:
            fallback = self._fall_back()
            if quota_bound:
                raise self.counts_unavailable() from None
            spent = counting.spend(fallback, counters)
        return uses.decided(counters, parts, spent)

    def count(self, key: str) -> int:
        """The count of the quota `key` in its current window (0: none); 503
        `counts_unavailable` while the storage is silent, which alone holds it, or while its
        counts are rebuilt."""
        try:
            storage = self._quota_storage()
            try:
                return counting.count(storage, key, self.mark)
            except counting.Lost:
                return self._rebuilt_then(lambda: counting.count(storage, key, self.mark))
        except self.storage.base_exceptions:
            self._fall_back()
            raise self.counts_unavailable() from None

    def adjust(self, key: str, expiry: float, add: int = 0, to: int | None = None) -> int:
        """The quota `key`'s count changed at once, `add` added to it or made `to` (a new
        window of `expiry` seconds when it has none): by how much it changed. 503
        `counts_unavailable` while the storage is silent, or its counts are rebuilt."""
        try:
            storage = self._quota_storage()

            def adjusted() -> int:
                return counting.adjust(storage, key, expiry, self.mark, add=add, to=to)

            try:
                return adjusted()
            except counting.Lost:
                return self._rebuilt_then(adjusted)
        except self.storage.base_exceptions:
            self._fall_back()
            raise self.counts_unavailable() from None

    def _rebuilt_then(self, operation: Callable[[], T]) -> T:
        """Redis has lost the quotas' counts (`operation()` raised counting.Lost): once
        this worker rebuilt them, `operation()` again; 503 `counts_unavailable` while another
        worker does (or the database fails)."""
        if self.rebuilder.rebuild():
            try:
                return operation()
            except counting.Lost:
                pass
        raise self.counts_unavailable()

    def _quota_storage(self) -> Storage:
        storage = self._storage()
        if storage is self.fallback:
            raise self.counts_unavailable()
        return storage

    def answers(self) -> bool:
        """Whether the counts are where RATELIMIT_STORAGE_URI says, not in this host's file
        while that storage is silent (asked again every RETRY_SECONDS)."""
        return self._storage() is self.storage

    def silent(self) -> None:
        """The storage failed an operation of another part (app/usage's): counted in this
        host's file until it answers, as after a failure of the limits' own."""
        if self.fallback_enabled:
            self._fall_back()

    def counts_unavailable(self) -> CountsUnavailable:
        """503 for a use or grant of a quota while the only storage that holds it is silent:
        retry once this worker asks it again."""
        retry_after = max(1, math.ceil(self.retry_at - time.monotonic()))
        return CountsUnavailable(
            503,
            "counts_unavailable",
            "The quotas' counts cannot be read now; retry later.",
            headers=[("Retry-After", str(retry_after))],
        )

    def state(self) -> str:
        """OK, DEGRADED while the shared storage does not answer (asked now unless this
        worker already counts elsewhere, where it is asked every RETRY_SECONDS), or
        rebuild.REBUILDING while Redis answers without the quotas' counts, which this worker then
        tries to rebuild."""
        if not self.shared:
            return OK
        if self.fallback is None:
            if self.storage.check():  # `limits`' check: False for any error
                return self._rebuilt()
            if not self.fallback_enabled:
                return DEGRADED
            self._fall_back()
        return DEGRADED if self._storage() is self.fallback else self._rebuilt()

    def _rebuilt(self) -> str:
        """OK when Redis holds the quotas' counts (or they are rebuilt now), else
        rebuild.REBUILDING; DEGRADED when it fails meanwhile."""
        try:
            return self.rebuilder.state()
        except self.storage.base_exceptions:
            return DEGRADED

    def quota_key(self, counter: str, window: str) -> str:
        """Where the quota of the keys of `counter` (app/quotas) counts in `window`."""
        return f"{self.prefix}/{QUOTA}/{counter}/{window}"

    def refusal(self, rate: str, identifier: str) -> ApiError:
        """429 with the whole seconds until `identifier`'s `rate` lets it through again."""
        head, tail = self.keys[rate]
        try:
            ends = self._storage().get_expiry(head + identifier + tail)
        except self.storage.base_exceptions:
            ends = self._fall_back().get_expiry(head + identifier + tail)
        retry_after = uses.seconds_until(ends)
        metrics.limit_refused(rate)
        return ApiError(
            429, "rate_limited", MESSAGES[rate], headers=[("Retry-After", str(retry_after))]
        )

    def _storage(self) -> Storage:
        """The storage, or this host's file while the storage is silent."""
        if self.fallback is None:
            return self.storage
        now = time.monotonic()
        if now >= self.retry_at:
            if self.storage.check():
                self.fallback = None
                metrics.counts_degraded(False)
                self.logger.warning("Rate limit storage answers again: counting there.")
                return self.storage
            self.retry_at = now + RETRY_SECONDS
        if now >= self.warned_at + WARN_SECONDS:
            self._warn()
        return self.fallback

    def _warn(self) -> None:
        self.warned_at = time.monotonic()
        self.logger.warning(
            "Rate limit storage unreachable (%s) - rate limits counted in this host's file "
            "until it answers; uses that would spend a quota refused with 503 "
            "counts_unavailable",
            counting.scheme(self.storage_uri),
        )

    def _fall_back(self) -> Storage:
        if not self.fallback_enabled:
            raise ApiError(
                503,
                "unavailable",
                "The abuse limits' storage does not answer; retry shortly.",
                headers=[RETRY_SHORTLY],
            )
        if self.fallback is None:
            if self.host_counts is None:
                self.host_counts = counting.storage(self.fallback_uri, {}, self.instance_path)
            self.fallback = self.host_counts
            metrics.counts_degraded(True)
            self._warn()
        self.retry_at = time.monotonic() + RETRY_SECONDS
        return self.fallback


def init_app(app: Flask) -> None:
    limits = app.extensions["limits"] = Limits(app)
    app.extensions[hosts.COUNTS_STATE] = limits.state


def _limits() -> Limits | None:
    limits: Limits = current_app.extensions["limits"]
    return limits if limits.enabled else None


def attempt() -> int | None:
    """One attempt to authenticate from this request's address, counted before its key is
    looked up, so that of any number sent at once no more than the limit are tried; 429
    once they are spent. A valid key gives its attempt back (forgive_and_count(), forgive()).
    The generation of what the checks read, read with it (app/access/seen.py)."""
    limits: Limits = current_app.extensions["limits"]
    if not limits.enabled:
        return limits.generation()
    allowed, generation = limits.attempt(address := client_address())
    if not allowed:
        raise limits.refusal(AUTH_FAILURES, address)
    return generation


def generation() -> int | None:
    """The generation of what the checks read (app/access/seen.py), read now."""
    limits: Limits = current_app.extensions["limits"]
    return limits.generation()


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


def spend_key(key: Caller, quotas: bool = True) -> KeyUse:
    """One use of `key` under the limits that bind it (it has some): its rate limits, and
    its quotas when `quotas`."""
    limits: Limits = current_app.extensions["limits"]
    return limits.spend_key(key, quotas)
