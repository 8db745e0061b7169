"""Usage counted in Redis where the limits count there (docs/design.md, "Many hosts": usage counts
exact across hosts, a host killed outright included).

With RATELIMIT_STORAGE_URI=redis://..., each use is added to one hash in Redis before its
answer starts (one script, one round trip), not to the worker's memory: a worker or host
killed outright takes no count with it. Every worker's usage thread, at each batch
(app/usage/counter.py), renames the hash to a batch of its own in one script, so that the
uses added meanwhile start a new hash, and writes the batch into key_usage in one
transaction that also records the batch's id (usage_batches); then it removes the batch from
Redis. A writer killed between its rename and that removal leaves the batch listed: any
worker takes it once it is ORPHAN_SECONDS old, and writes it unless its id is recorded, so
that each batch is written once, whoever finds it and however often.

Redis silent (app/access/limits.py's fallback), a Redis cluster, or the counts in this
host's file or memory: each worker counts in its memory as before (counter.py), and a worker
killed outright loses at most one batch's time of its counts. A use whose write timed out is
counted in memory: if Redis ran it when it answered again, that use is counted twice, never
lost.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator

from limits.storage import Storage

USAGE = "usage"
BATCHES = "usage/batches"
# A batch listed this long is one whose writer died (or could not write it): another takes it.
ORPHAN_SECONDS = 60

log = logging.getLogger(__name__)

# A count's key: the key's id, its hour (hours since 1970), the outcome, the scope.
Row = tuple[int, int, str, str]

# Redis: each count (ARGV: field, count, field, count...) added to the hash KEYS[1].
_ADD = """
for i = 1, #ARGV, 2 do redis.call('hincrby', KEYS[1], ARGV[i], ARGV[i + 1]) end
"""
# Redis: the hash KEYS[1], if any, renamed to the batch KEYS[3] unless that exists (the
# script run twice never overwrites a batch) and listed in KEYS[2] with Redis's clock (ms);
# the batches listed at least ARGV[2] ms ago returned, with whether KEYS[3] was made.
_TAKE = """
local now = redis.call('time')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local made = 0
if redis.call('exists', KEYS[1]) == 1 then made = redis.call('renamenx', KEYS[1], KEYS[3]) end
if made == 1 then redis.call('zadd', KEYS[2], ms, ARGV[1]) end
return {made, redis.call('zrangebyscore', KEYS[2], '-inf', ms - tonumber(ARGV[2]))}
"""


def _field(row: Row) -> str:
    key, hour, outcome, scope = row
    return f"{key}|{hour}|{outcome}|{scope}"


def _row(field: bytes) -> Row | None:
    """The count's key a field names; None for one this version cannot read."""
    try:
        key, hour, outcome, scope = field.decode().split("|", 3)
        return int(key), int(hour), outcome, scope
    except ValueError:  # UnicodeDecodeError included
        return None


class SharedUsage:
    """The usage's hash and batches in the Redis of `counts` (`limits`' RedisStorage), under
    `prefix` (RATELIMIT_KEY_PREFIX, as the limits' counters: two services sharing one Redis
    under two prefixes never write each other's usage)."""

    def __init__(self, counts: Storage, prefix: str) -> None:
        self.connection = counts.get_connection()
        self.usage = counts.prefixed_key(f"{prefix}/{USAGE}")
        self.batches = counts.prefixed_key(f"{prefix}/{BATCHES}")
        self.prefix = counts.prefixed_key(f"{prefix}/{USAGE}/batch/")
        self.add_script = self.connection.register_script(_ADD)
        self.take_script = self.connection.register_script(_TAKE)

    def add(self, counts: dict[Row, int]) -> None:
        """`counts` added to the hash, at once; the storage's errors raised."""
        arguments = [value for row, count in counts.items() for value in (_field(row), count)]
        self.add_script([self.usage], arguments)

    def take(self) -> Iterator[str]:
        """The batches to write: the hash's counts so far as a new batch (none when there
        are none), then each batch listed at least ORPHAN_SECONDS."""
        batch = secrets.token_hex(16)
        made, orphans = self.take_script(
            [self.usage, self.batches, self.prefix + batch], [batch, ORPHAN_SECONDS * 1000]
        )
        if made:
            yield batch
        for orphan in orphans:
            if orphan.decode() != batch:
                yield orphan.decode()

    def counts(self, batch: str) -> dict[Row, int]:
        """The counts of `batch` (none: it was removed meanwhile, by a worker that wrote it);
        a field this version cannot read is left out, and logged."""
        counts = {}
        for field, count in self.connection.hgetall(self.prefix + batch).items():
            row = _row(field)
            if row is None or not count.isdigit():
                log.warning("usage: a count of batch %s cannot be read, left out", batch)
                continue
            counts[row] = int(count)
        return counts

    def remove(self, batch: str) -> None:
        """`batch`, written, gone from Redis."""
        pipeline = self.connection.pipeline()
        pipeline.delete(self.prefix + batch)
        pipeline.zrem(self.batches, batch)
        pipeline.execute()
