"""Where every limit is counted (CONTRACT.md section 20): the abuse limits, a key's own
rate limit and, for the same reasons, anything else that must hold across workers.

- `host://` (the default): a table in a memory-mapped file that every worker of this host
  opens, so that a key limited to R uses gets R across all of them, with no server to
  install. The file is `instance/limits.counts` (`host:///path/to/file` names another).
  A worker that dies takes no count with it: the counts are in the file, and the kernel
  releases a dead process's lock. They survive a restart of the service too.
- `redis://...`: `limits`' Redis storage, shared by every worker of every host.
- `memory://`: each process's own memory, for one process only (`flask run`, tests):
  gunicorn with several workers refuses it at start (app/bootstrap.py).

HostCounts implements `limits`' Storage for its fixed windows, as its MemoryStorage does: a
counter's window starts with its first hit and ends `expiry` seconds later. The table is
measured against the alternatives in bench/README.md ("Counting once per host")."""

from __future__ import annotations

import fcntl
import hashlib
import math
import mmap
import os
import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, NamedTuple

from limits.storage import (
    MemoryStorage,
    RedisClusterStorage,
    RedisStorage,
    Storage,
    storage_from_string,
)

# How often a worker's memory drops the counters whose period has ended.
SWEEP_SECONDS = 10.0

HOST = "host"
FILE_NAME = "limits.counts"
# The file: a header, then SLOTS slots of a counter each (its key's digest, the end of its
# window in Unix seconds, its count), found by open addressing over PROBES slots.
MAGIC = b"apikeys-counts-1"
HEADER = struct.Struct("<16sQ")  # magic, number of slots
SLOT = struct.Struct("<16sdq")  # digest, end of the window, count
ENDS = struct.Struct("<d")
SLOTS = 1 << 20  # 32 MiB of file, of which only the pages of used slots take memory
PROBES = 64
NEVER_USED = bytes(16)


class _FileLock:
    """This process's threads take turns, then the processes of the host (fcntl's lock,
    which the kernel drops with a process that dies)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.threads = threading.Lock()

    def __enter__(self) -> None:
        self.threads.acquire()
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX)
        except BaseException:
            self.threads.release()
            raise

    def __exit__(self, *exc: object) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN)
        self.threads.release()


class HostCounts(Storage):
    """The counts of every worker of this host, in one memory-mapped file: each operation
    holds the file's lock (fcntl, owned by the process, so a forked child never shares its
    parent's) for a few microseconds. A counter is a slot of 32 bytes, written in one
    copy; a full neighbourhood of slots gives up the counter that ends soonest."""

    STORAGE_SCHEME: ClassVar[list[str]] = [HOST]

    def __init__(self, uri: str, **options: object) -> None:
        super().__init__(uri)
        path = uri.split("://", 1)[1]
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self.locked = _FileLock(self.fd)
        size = HEADER.size + SLOTS * SLOT.size
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            if os.fstat(self.fd).st_size == 0:
                os.ftruncate(self.fd, size)
                os.pwrite(self.fd, HEADER.pack(MAGIC, SLOTS), 0)
            magic, slots = HEADER.unpack(os.pread(self.fd, HEADER.size, 0))
            if (magic, slots) != (MAGIC, SLOTS) or os.fstat(self.fd).st_size != size:
                raise RuntimeError(
                    f"{self.path} is not a counts file of this version of the service: "
                    "remove it (it holds only the limits' current windows)"
                )
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)
        self.map = mmap.mmap(self.fd, size)
        self.mask = SLOTS - 1

    @property
    def base_exceptions(self) -> type[Exception]:
        return OSError

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        digest = _digest(key)
        with self.locked:
            now = time.time()
            offset = self._slot(digest, now)
            held, ends, count = SLOT.unpack_from(self.map, offset)
            if held != digest or ends <= now:  # a new window
                ends, count = now + expiry, 0
            count += amount
            SLOT.pack_into(self.map, offset, digest, ends, count)
            return count

    def spend(self, counters: Sequence[Counter]) -> Spent:
        """One use of every counter, or of none: see spend()."""
        digests = [_digest(counter.key) for counter in counters]
        with self.locked:
            now = time.time()
            slots = []
            for digest, counter in zip(digests, counters, strict=True):
                offset = self._slot(digest, now)
                held, ends, count = SLOT.unpack_from(self.map, offset)
                if held != digest or ends <= now:  # a new window
                    ends, count = now + counter.expiry, 0
                slots.append((offset, ends, count))
            refused = _refused(counters, [count for _, _, count in slots])
            if refused is None:
                for digest, (offset, ends, count) in zip(digests, slots, strict=True):
                    SLOT.pack_into(self.map, offset, digest, ends, count + 1)
                slots = [(offset, ends, count + 1) for offset, ends, count in slots]
            return Spent(refused, [count for _, _, count in slots], [e for _, e, _ in slots])

    def set(self, key: str, expiry: float, count: int) -> None:
        """The key's count made `count`, in its current window (or a new one)."""
        digest = _digest(key)
        with self.locked:
            now = time.time()
            offset = self._slot(digest, now)
            held, ends, _ = SLOT.unpack_from(self.map, offset)
            if held != digest or ends <= now:
                ends = now + expiry
            SLOT.pack_into(self.map, offset, digest, ends, count)

    def give_back(self, key: str) -> None:
        """One count taken back, within the key's current window only."""
        digest = _digest(key)
        with self.locked:
            self._take_back(digest, time.time())

    def exchange(self, back: str, key: str, expiry: float) -> int:
        """give_back(back) and incr(key, expiry) under one lock: see exchange()."""
        back_digest, digest = _digest(back), _digest(key)
        with self.locked:
            now = time.time()
            self._take_back(back_digest, now)
            offset = self._slot(digest, now)
            held, ends, count = SLOT.unpack_from(self.map, offset)
            if held != digest or ends <= now:  # a new window
                ends, count = now + expiry, 0
            SLOT.pack_into(self.map, offset, digest, ends, count + 1)
            return count + 1

    def _take_back(self, digest: bytes, now: float) -> None:
        offset = self._slot(digest, now)
        held, ends, count = SLOT.unpack_from(self.map, offset)
        if held == digest and ends > now and count > 0:
            SLOT.pack_into(self.map, offset, digest, ends, count - 1)

    def get(self, key: str) -> int:
        return self._read(key)[1]

    def get_expiry(self, key: str) -> float:
        return self._read(key)[0]

    def check(self) -> bool:
        return True

    def reset(self) -> int:
        with self.locked:
            self.map[HEADER.size :] = bytes(len(self.map) - HEADER.size)
        return 0

    def clear(self, key: str) -> None:
        digest = _digest(key)
        with self.locked:
            offset = self._slot(digest, time.time())
            if self.map[offset : offset + 16] == digest:
                SLOT.pack_into(self.map, offset, digest, 0.0, 0)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)

    def _read(self, key: str) -> tuple[float, int]:
        """The end of the key's window and its count; (now, 0) when it has none."""
        digest = _digest(key)
        with self.locked:
            now = time.time()
            offset = self._slot(digest, now)
            held, ends, count = SLOT.unpack_from(self.map, offset)
        if held != digest or ends <= now:
            return now, 0
        return ends, count

    def _slot(self, digest: bytes, now: float) -> int:
        """The offset of the slot that holds `digest`, or of the one it may take: a slot
        never used, else one whose window has ended, else the one that ends soonest. A
        counter is never looked for past a slot never used, since slots are never emptied."""
        start = int.from_bytes(digest[:8], "little")
        view = self.map
        reusable = -1
        soonest, soonest_ends = -1, float("inf")
        for probe in range(PROBES):
            offset = HEADER.size + ((start + probe) & self.mask) * SLOT.size
            held = view[offset : offset + 16]
            if held == digest:
                return offset
            if held == NEVER_USED:
                return offset if reusable < 0 else reusable
            if reusable < 0:
                (ends,) = ENDS.unpack_from(view, offset + 16)
                if ends <= now:
                    reusable = offset
                elif ends < soonest_ends:
                    soonest, soonest_ends = offset, ends
        return reusable if reusable >= 0 else soonest


def _digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode(), digest_size=16).digest()


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

    def spend(self, counters: Sequence[Counter]) -> Spent:
        """One use of every counter, or of none: see spend()."""
        now = time.time()
        with self.lock:
            for counter in counters:
                if self.expirations.get(counter.key, 0) <= now:  # a new window
                    self.storage[counter.key] = 0
                    self.expirations[counter.key] = now + counter.expiry
            counts = [self.storage[counter.key] for counter in counters]
            refused = _refused(counters, counts)
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
            if self.expirations.get(key, 0) <= now:  # a new window
                self.storage[key] = 0
                self.expirations[key] = now + expiry
            self.storage[key] += 1
            return self.storage[key]

    def _take_back(self, key: str, now: float) -> None:
        if self.expirations.get(key, 0) > now and self.storage.get(key, 0) > 0:
            self.storage[key] -= 1

    def _sweep(self, now: float) -> None:
        for key in [key for key, ends in self.expirations.items() if ends <= now]:
            self.storage.pop(key, None)
            del self.expirations[key]
        self.sweep_at = now + SWEEP_SECONDS


def scheme(uri: str) -> str:
    return uri.split(":", 1)[0]


class Counter(NamedTuple):
    """One of a use's counters: its key, the length of a new window, and how many uses
    a window allows."""

    key: str
    expiry: float
    limit: int


class Spent(NamedTuple):
    """What spend() did: the index of the first counter that refused the use (None: every
    counter counted it), each counter's count after, and the end of each one's window."""

    refused: int | None
    counts: list[int]
    ends: list[float]


def _refused(counters: Sequence[Counter], counts: Sequence[int]) -> int | None:
    for index, (counter, count) in enumerate(zip(counters, counts, strict=True)):
        if count >= counter.limit:
            return index
    return None


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


def _scripted(counts: Storage) -> bool:
    """Whether `counts` takes this module's scripts: Redis, but a cluster, where the keys of
    one script may live on different nodes."""
    return isinstance(counts, RedisStorage) and not isinstance(counts, RedisClusterStorage)


# Redis: every counter's count read, then each incremented only if none is spent, in one
# script (atomic in Redis). ARGV: each counter's window length and limit.
_SPEND = """
local counts, ends, refused = {}, {}, 0
for i, key in ipairs(KEYS) do
  counts[i] = tonumber(redis.call('get', key) or '0')
  if refused == 0 and counts[i] >= tonumber(ARGV[2 * i]) then refused = i end
end
if refused == 0 then
  for i, key in ipairs(KEYS) do
    counts[i] = redis.call('incr', key)
    if redis.call('ttl', key) == -1 then redis.call('expire', key, ARGV[2 * i - 1]) end
  end
end
for i, key in ipairs(KEYS) do ends[i] = redis.call('pttl', key) end
return {refused, counts, ends}
"""


def spend(counts: Storage, counters: Sequence[Counter]) -> Spent:
    """One use counted by every counter, or by none when one of them has no use left in
    its window (CONTRACT.md section 20, all or nothing): a key's own rate limit and its
    quota, one decision under one lock (one script in Redis). Another storage of `limits`
    (a Redis cluster included) is asked counter by counter, which is exact for each but
    not all or nothing."""
    if isinstance(counts, HostCounts | MemoryCounts):
        return counts.spend(counters)
    if _scripted(counts):
        keys = [counts.prefixed_key(counter.key) for counter in counters]
        arguments = [value for c in counters for value in (max(1, math.ceil(c.expiry)), c.limit)]
        script = counts.get_connection().register_script(_SPEND)
        refused, found, ttls = script(keys, arguments)
        now = time.time()
        ends = [now + max(ttl, 0) / 1000 for ttl in ttls]
        return Spent(None if refused == 0 else refused - 1, [int(c) for c in found], ends)
    found = [counts.get(counter.key) for counter in counters]
    refused = _refused(counters, found)
    if refused is None:
        found = [counts.incr(c.key, math.ceil(c.expiry)) for c in counters]
    return Spent(refused, found, [counts.get_expiry(counter.key) for counter in counters])


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
    elif _scripted(counts):
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
    if _scripted(counts):
        script = counts.get_connection().register_script(_GIVE_BACK)
        keys = [counts.prefixed_key(back), counts.prefixed_key(key)]
        return int(script(keys, [max(1, math.ceil(expiry))]))
    give_back(counts, back)
    return counts.incr(key, math.ceil(expiry))


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
