"""Where to count the limits once per host, measured (bench/README.md, "Counting once per
host"): each candidate storage's cost per check, and whether 4 processes hitting one key
at once are allowed exactly the limit.

    python -m bench.counting            # memory, host (the file), SQLite in WAL mode, Redis

- memory: `limits`' memory in each process (what one worker counts; exact only alone);
- host: app/access/counting/host.py's HostCounts, the default;
- sqlite: a counter table in SQLite (WAL, synchronous=NORMAL), one upsert per check, as
  the instance folder could hold it; written here only to be measured;
- redis: `limits`' Redis storage on this machine's Redis (TEST_REDIS_URL or 127.0.0.1).
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import tempfile
import time

from limits.storage import storage_from_string

from app.access.counting.host import HostCounts
from app.access.counting.memory import MemoryCounts

CHECKS = 20_000
PROCESSES = 4
HITS = 400
LIMIT = 317


class SQLiteCounts:
    """A fixed-window counter per key in a SQLite table: one write transaction a check."""

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS counts (key TEXT PRIMARY KEY, ends REAL, count INTEGER)"
        )

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        now = time.time()
        (count,) = self.connection.execute(
            "INSERT INTO counts VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET"
            " count = CASE WHEN ends <= ? THEN excluded.count ELSE count + excluded.count END,"
            " ends = CASE WHEN ends <= ? THEN excluded.ends ELSE ends END RETURNING count",
            (key, now + expiry, amount, now, now),
        ).fetchone()
        return count


def make(kind: str, folder: str):
    if kind == "memory":
        return MemoryCounts()
    if kind == "host":
        return HostCounts(f"host://{folder}/limits.counts")
    if kind == "sqlite":
        return SQLiteCounts(f"{folder}/counts.sqlite3")
    url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    return storage_from_string(url)


def cost(kind: str, folder: str) -> float:
    """Microseconds per check of one process, on 100 keys."""
    counts = make(kind, folder)
    keys = [f"bench-{os.getpid()}-{n}" for n in range(100)]
    start = time.perf_counter()
    for n in range(CHECKS):
        counts.incr(keys[n % 100], 60)
    return (time.perf_counter() - start) / CHECKS * 1e6


def hammer(kind: str, folder: str, key: str, start: float) -> int:
    counts = make(kind, folder)
    while time.time() < start:
        pass
    return sum(counts.incr(key, 60) <= LIMIT for _ in range(HITS))


def allowed_at_once(kind: str, folder: str) -> int:
    key = f"bench-once-{os.getpid()}-{time.time()}"
    start = time.time() + 1.0
    with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
        return sum(pool.starmap(hammer, [(kind, folder, key, start)] * PROCESSES))


def main() -> None:
    print(
        f"{'storage':8} {'us/check':>9} {'allowed of ' + str(PROCESSES * HITS):>16} (limit {LIMIT})"
    )
    for kind in ("memory", "host", "sqlite", "redis"):
        with tempfile.TemporaryDirectory() as folder:
            make(kind, folder)  # the file or table, before the processes race to make it
            print(f"{kind:8} {cost(kind, folder):9.2f} {allowed_at_once(kind, folder):16}")


if __name__ == "__main__":
    main()
