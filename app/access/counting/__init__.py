"""Where every limit is counted (docs/design.md, "Promises kept by default"): the abuse limits, a
key's own rate limit and, for the same reasons, anything else that must hold across workers.

- `host://` (the default): a table in a memory-mapped file that every worker of this host
  opens, so that a key limited to R uses gets R across all of them, with no server to
  install. The file is `instance/limits.counts` (`host:///path/to/file` names another).
  A worker that dies takes no count with it: the counts are in the file, and the kernel
  releases a dead process's lock. They survive a restart of the service too.
- `redis://...`: `limits`' Redis storage, shared by every worker of every host.
- `memory://`: each process's own memory, for one process only (`flask run`, tests):
  gunicorn with several workers refuses it at start (app/bootstrap.py).

HostCounts (host.py) and MemoryCounts (memory.py) implement `limits`' Storage for its fixed
windows, as its MemoryStorage does: a counter's window starts with its first hit and ends
`expiry` seconds later. Here: which storage a URI names, and the operations every limit
needs of any of them, in one step where the storage has one."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path

from limits.storage import RedisClusterStorage, RedisStorage, Storage, storage_from_string

from app.access.counting.host import FILE_NAME, HOST, HostCounts
from app.access.counting.memory import MemoryCounts
from app.access.counting.windows import Counter, Spent, first_refusing


def scheme(uri: str) -> str:
    return uri.split(":", 1)[0]


# Redis: one count taken back from KEYS[1] when it has one (a window that has ended has
# none), then, with KEYS[2], one added to it (ARGV[1]: the length of a new window, as
# `limits`' own incr_expire starts one) and its count returned; atomic in Redis.
_GIVE_BACK = """
if tonumber(redis.call('get', KEYS[1]) or '0') > 0 then redis.call('decr', KEYS[1]) end
if KEYS[2] == nil then return 0 end
local count = redis.call('incr', KEYS[2])
if count == 1 then redis.call('expire', KEYS[2], ARGV[1]) end
return count
"""


def scripted(counts: Storage) -> bool:
    """Whether `counts` takes this module's scripts: Redis, but a cluster, where the keys of
    one script may live on different nodes."""
    return isinstance(counts, RedisStorage) and not isinstance(counts, RedisClusterStorage)


# Redis: every counter's count read, then each incremented only if none is spent, in one
# script (atomic in Redis). ARGV: each counter's window length and limit. A KEYS[n + 1] past
# the n counters is the mark of the counts (MARK): without it, nothing is counted and the
# script answers {-1} (LOST).
_SPEND = """
local n = #ARGV / 2
if #KEYS > n and redis.call('exists', KEYS[n + 1]) == 0 then return {-1} end
local counts, ends, refused = {}, {}, 0
for i = 1, n do
  counts[i] = tonumber(redis.call('get', KEYS[i]) or '0')
  if refused == 0 and counts[i] >= tonumber(ARGV[2 * i]) then refused = i end
end
if refused == 0 then
  for i = 1, n do
    counts[i] = redis.call('incr', KEYS[i])
    if redis.call('ttl', KEYS[i]) == -1 then redis.call('expire', KEYS[i], ARGV[2 * i - 1]) end
  end
end
for i = 1, n do ends[i] = redis.call('pttl', KEYS[i]) end
return {refused, counts, ends}
"""
LOST = -1
# Where Redis keeps the mark of the counts, under the limits' prefix: written once they are
# all there (app/access/rebuild.py), so that a Redis without it has lost them (a restart
# without persistence, a FLUSHDB, a failover to an empty replica), or never had them.
MARK = "counts"


class Lost(Exception):
    """Redis answers without the mark of its counts: the quotas' counts are to be rebuilt
    before any is spent, read or granted (app/access/rebuild.py)."""


def spend(counts: Storage, counters: Sequence[Counter], mark: str | None = None) -> Spent:
    """One use counted by every counter, or by none when one of them has no use left in
    its window (all or nothing): a key's own rate limit and its quota, one decision under
    one lock (one script in Redis). Another storage of `limits` (a Redis cluster included)
    is asked counter by counter, which is exact for each but not all or nothing. With a
    `mark` (a quota among the counters), Lost when Redis has lost its counts: none counted."""
    if isinstance(counts, HostCounts | MemoryCounts):
        return counts.spend(counters)
    if scripted(counts):
        keys = [counts.prefixed_key(counter.key) for counter in counters]
        if mark is not None:
            keys.append(counts.prefixed_key(mark))
        arguments = [value for c in counters for value in (max(1, math.ceil(c.expiry)), c.limit)]
        script = counts.get_connection().register_script(_SPEND)
        answer = script(keys, arguments)
        if answer[0] == LOST:
            raise Lost
        refused, found, ttls = answer
        now = time.time()
        ends = [now + max(ttl, 0) / 1000 for ttl in ttls]
        return Spent(None if refused == 0 else refused - 1, [int(c) for c in found], ends)
    found = [counts.get(counter.key) for counter in counters]
    refused = first_refusing(counters, found)
    if refused is None:
        found = [counts.incr(c.key, math.ceil(c.expiry)) for c in counters]
    return Spent(refused, found, [counts.get_expiry(counter.key) for counter in counters])


def count(counts: Storage, key: str, mark: str) -> int:
    """The count of `key` in its current window (0: none); Lost when Redis has lost its
    counts (read with the mark, in one round trip; a Redis cluster, whose keys may live on
    different nodes, is read without it)."""
    if not scripted(counts):
        return counts.get(key)
    found, marked = counts.get_connection().mget(
        [counts.prefixed_key(key), counts.prefixed_key(mark)]
    )
    if marked is None:
        raise Lost
    return int(found or 0)


# Redis: the count of KEYS[1] changed, as ARGV[1] says ('add': by ARGV[2]; 'set': to
# ARGV[2]), in its current window or a new one of ARGV[3] seconds, unless Redis has lost
# the mark of its counts (KEYS[2]): {1, before, after}, or {0} then.
_ADJUST = """
if redis.call('exists', KEYS[2]) == 0 then return {0} end
local before = tonumber(redis.call('get', KEYS[1]) or '0')
local after = tonumber(ARGV[2])
if ARGV[1] == 'add' then after = before + after end
if redis.call('ttl', KEYS[1]) > 0 then
  redis.call('set', KEYS[1], after, 'keepttl')
else
  redis.call('set', KEYS[1], after, 'ex', ARGV[3])
end
return {1, before, after}
"""


def adjust(counts: Storage, key: str, expiry: float, mark: str, add: int = 0, to=None) -> int:
    """`key`'s count changed in its current window (a new one of `expiry` seconds when it
    has none): `add` added to it, or made `to`; by how much it changed. Lost when Redis has
    lost its counts."""
    if isinstance(counts, RedisStorage):
        script = counts.get_connection().register_script(_ADJUST)
        keys = [counts.prefixed_key(key), counts.prefixed_key(mark)]
        mode, value = ("add", add) if to is None else ("set", to)
        answer = script(keys, [mode, value, max(1, math.ceil(expiry))])
        if not answer[0]:
            raise Lost
        return int(answer[2]) - int(answer[1])
    if to is None:
        counts.incr(key, math.ceil(expiry), amount=add)
        return add
    before = counts.get(key)
    set_count(counts, key, expiry, to)
    return to - before


def set_count(counts: Storage, key: str, expiry: float, count: int) -> None:
    """`key`'s count made `count` in its current window (a new one of `expiry` seconds
    when it has none): a grant of more uses, or fewer."""
    if isinstance(counts, HostCounts | MemoryCounts):
        counts.set(key, expiry, count)
    elif isinstance(counts, RedisStorage):
        connection = counts.get_connection()
        prefixed = counts.prefixed_key(key)
        if not connection.set(prefixed, count, xx=True, keepttl=True):
            connection.set(prefixed, count, ex=max(1, math.ceil(expiry)))
    else:
        counts.clear(key)
        if count:
            counts.incr(key, math.ceil(expiry), amount=count)


def give_back(counts: Storage, key: str) -> None:
    """One count of `key` taken back within its current window: nothing when the window
    has ended meanwhile. In a storage with no conditional decrement (a Redis cluster) a
    window that has just ended is left at -1 for a second."""
    if isinstance(counts, HostCounts | MemoryCounts):
        counts.give_back(key)
    elif scripted(counts):
        script = counts.get_connection().register_script(_GIVE_BACK)
        script([counts.prefixed_key(key)])
    else:
        counts.incr(key, 1, amount=-1)


def exchange(counts: Storage, back: str, key: str, expiry: float) -> int:
    """One count of `back` taken back, as give_back() does, and one of `key` added (a new
    window of `expiry` seconds when it has none), in one operation where the storage has
    one (one lock of this host's file, one script in Redis): a valid key's attempt given
    back and its request counted. The count of `key` after."""
    if isinstance(counts, HostCounts | MemoryCounts):
        return counts.exchange(back, key, expiry)
    if scripted(counts):
        script = counts.get_connection().register_script(_GIVE_BACK)
        keys = [counts.prefixed_key(back), counts.prefixed_key(key)]
        return int(script(keys, [max(1, math.ceil(expiry))]))
    give_back(counts, back)
    return counts.incr(key, math.ceil(expiry))


# Where Redis keeps the generation of what the checks read (app/access/seen.py), after the
# deployment's RATELIMIT_KEY_PREFIX and a slash, so that deployments sharing a Redis bump
# apart (the caller names the whole key).
GENERATION = "generation"

# Redis: the generation (the script's KEYS[G]) as `generation`. Where Redis has none (a new
# Redis, or one that lost its data) it begins at Redis's clock in microseconds, so that it
# never comes back to a value a worker may hold rows of from before.
_BEGUN = """
local generation = redis.call('get', KEYS[G])
if not generation then
  local now = redis.call('time')
  generation = now[1] .. string.sub('00000' .. now[2], -6)
  redis.call('set', KEYS[G], generation)
end
"""
# Redis: the generation (KEYS[1]) read, or with ARGV[1] == '1' bumped.
_GENERATION = (
    _BEGUN.replace("KEYS[G]", "KEYS[1]")
    + """
if ARGV[1] == '1' then return redis.call('incr', KEYS[1]) end
return tonumber(generation)
"""
)
# Redis: one attempt counted (KEYS[1], a new window of ARGV[1] seconds when it has none, as
# `limits`' incr_expire counts) and the generation read (KEYS[2]), in one round trip.
_ATTEMPT = (
    """
local count = redis.call('incr', KEYS[1])
if count == 1 then redis.call('expire', KEYS[1], ARGV[1]) end
"""
    + _BEGUN.replace("KEYS[G]", "KEYS[2]")
    + """
return {count, tonumber(generation)}
"""
)


def generation(counts: Storage, key: str) -> int | None:
    """The generation of what the checks read where `counts` keeps it (app/access/seen.py;
    in Redis, at `key`); None in a storage that keeps none: neither this host's file nor
    Redis (a process's memory, which no other process can bump, included)."""
    if isinstance(counts, HostCounts):
        return counts.generation()
    if isinstance(counts, RedisStorage):
        script = counts.get_connection().register_script(_GENERATION)
        return int(script([counts.prefixed_key(key)], [0]))
    return None


def bump(counts: Storage, key: str) -> None:
    """The next generation where `counts` keeps it (in Redis, at `key`): every worker's
    rows of keys are stale."""
    if isinstance(counts, HostCounts):
        counts.bump()
    elif isinstance(counts, RedisStorage):
        script = counts.get_connection().register_script(_GENERATION)
        script([counts.prefixed_key(key)], [1])


def attempt(
    counts: Storage, key: str, expiry: float, generation_key: str
) -> tuple[int, int | None]:
    """One count of `key` added (a new window of `expiry` seconds when it has none) and the
    generation read (in Redis, at `generation_key`), in one round trip to Redis: the count
    after, and the generation."""
    if scripted(counts):
        script = counts.get_connection().register_script(_ATTEMPT)
        keys = [counts.prefixed_key(key), counts.prefixed_key(generation_key)]
        count, found = script(keys, [max(1, math.ceil(expiry))])
        return int(count), int(found)
    return counts.incr(key, math.ceil(expiry)), generation(counts, generation_key)


def refuse_per_process(uri: str, workers: int) -> None:
    """Counts in each process's memory would multiply every limit by the number of workers:
    refused at start, naming the fix, never served silently."""
    if workers > 1 and scheme(uri) == "memory":
        raise RuntimeError(
            f"RATELIMIT_STORAGE_URI={uri} counts in each worker's own memory: with {workers} "
            "workers every limit would let through up to that many times what it says. Leave "
            "RATELIMIT_STORAGE_URI unset (host://: counted once for this host), set it to "
            "redis://... (once across hosts), or run one worker (WEB_CONCURRENCY=1)."
        )


def storage(uri: str, options: dict, instance_path: str) -> Storage:
    """Where the counts live: this host's file (host://, in the instance folder unless the
    URI names a path), this process's memory (memory://), or a shared server."""
    if scheme(uri) == HOST:
        if uri.split("://", 1)[1] == "":
            Path(instance_path).mkdir(parents=True, exist_ok=True)
            uri = f"host://{Path(instance_path) / FILE_NAME}"
        return HostCounts(uri)
    if scheme(uri) == "memory":
        return MemoryCounts()
    return storage_from_string(uri, **options)
