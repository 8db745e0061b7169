"""Counts in this process's memory (`memory://`, and every worker's fallback while its
storage does not answer)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from limits.storage import MemoryStorage

from app.access.counting.windows import Counter, Spent, first_refusing

# How often a worker's memory drops the counters whose period has ended.
SWEEP_SECONDS = 10.0


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
            return self._add(key, now, expiry, amount)

    def spend(self, counters: Sequence[Counter]) -> Spent:
        """One use of every counter, or of none: see spend()."""
        now = time.time()
        with self.lock:
            for counter in counters:
                if self.expirations.get(counter.key, 0) <= now:  # a new window
                    self.storage[counter.key] = 0
                    self.expirations[counter.key] = now + counter.expiry
            counts = [self.storage[counter.key] for counter in counters]
            refused = first_refusing(counters, counts)
            if refused is None:
                for counter in counters:
                    self.storage[counter.key] += 1
                counts = [count + 1 for count in counts]
            return Spent(refused, counts, [self.expirations[c.key] for c in counters])

    def set(self, key: str, expiry: float, count: int) -> None:
        """The key's count made `count`, in its current window (or a new one)."""
        with self.lock:
            if self.expirations.get(key, 0) <= time.time():
                self.expirations[key] = time.time() + expiry
            self.storage[key] = count

    def give_back(self, key: str) -> None:
        """One count taken back, within the key's current window only."""
        with self.lock:
            self._take_back(key, time.time())

    def exchange(self, back: str, key: str, expiry: float) -> int:
        """give_back(back) and incr(key, expiry) under one lock: see exchange()."""
        with self.lock:
            now = time.time()
            self._take_back(back, now)
            return self._add(key, now, expiry, 1)

    def _add(self, key: str, now: float, expiry: float, amount: int) -> int:
        if self.expirations.get(key, 0) <= now:  # a new window
            self.storage[key] = 0
            self.expirations[key] = now + expiry
        self.storage[key] += amount
        return self.storage[key]

    def _take_back(self, key: str, now: float) -> None:
        if self.expirations.get(key, 0) > now and self.storage.get(key, 0) > 0:
            self.storage[key] -= 1

    def _sweep(self, now: float) -> None:
        for key in [key for key, ends in self.expirations.items() if ends <= now]:
            self.storage.pop(key, None)
            del self.expirations[key]
        self.sweep_at = now + SWEEP_SECONDS
