"""This host's counts (`host://`, the default, app/access/counting/__init__.py says why): one file
that every worker maps into memory, a table of counters found by open addressing, each
operation under the file's lock. Measured against the alternatives in bench/README.md
("Counting once per host")."""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from limits.storage import Storage

from app.access.counting.windows import Counter, Spent, first_refusing

HOST = "host"
FILE_NAME = "limits.counts"
# The file: a header, then SLOTS slots of a counter each (its key's digest, the end of its
# window in Unix seconds, its count), found by open addressing over PROBES slots, then the
# generation of what the checks read (app/access/seen.py). A file without the generation (as
# the service wrote it before there was one) is lengthened at its first open.
MAGIC = b"apikeys-counts-1"
HEADER = struct.Struct("<16sQ")  # magic, number of slots
SLOT = struct.Struct("<16sdq")  # digest, end of the window, count
ENDS = struct.Struct("<d")
GENERATION = struct.Struct("<q")
SLOTS = 1 << 20  # 32 MiB of file, of which only the pages of used slots take memory
PROBES = 64
NEVER_USED = bytes(16)
SLOTS_END = HEADER.size + SLOTS * SLOT.size
SIZE = SLOTS_END + GENERATION.size


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
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            if os.fstat(self.fd).st_size == 0:
                os.ftruncate(self.fd, SIZE)
                os.pwrite(self.fd, HEADER.pack(MAGIC, SLOTS), 0)
            elif os.fstat(self.fd).st_size == SLOTS_END:  # no generation yet
                os.ftruncate(self.fd, SIZE)
            magic, slots = HEADER.unpack(os.pread(self.fd, HEADER.size, 0))
            if (magic, slots) != (MAGIC, SLOTS) or os.fstat(self.fd).st_size != SIZE:
                raise RuntimeError(
                    f"{self.path} is not a counts file of this version of the service: "
                    "remove it (it holds only the limits' current windows)"
                )
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)
        self.map = mmap.mmap(self.fd, SIZE)
        # Counters fall all over the file: without this, the kernel maps 16 pages around
        # each page a process first uses (fault-around), and a worker holds 64 KiB more
        # for most new counter, up to the whole 32 MiB (bench/README.md, "A worker's
        # memory"); with it, the page itself, 4 KiB.
        self.map.madvise(mmap.MADV_RANDOM)
        self.mask = SLOTS - 1

    @property
    def base_exceptions(self) -> type[Exception]:
        return OSError

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        digest = _digest(key)
        with self.locked:
            return self._add(digest, time.time(), expiry, amount)

    def spend(self, counters: Sequence[Counter]) -> Spent:
        """One use of every counter, or of none: see spend()."""
        digests = [_digest(counter.key) for counter in counters]
        with self.locked:
            now = time.time()
            slots = []
            for digest, counter in zip(digests, counters, strict=True):
                offset, ends, count = self._current(digest, now)
                slots.append((offset, ends or now + counter.expiry, count))
            refused = first_refusing(counters, [count for _, _, count in slots])
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
            offset, ends, _ = self._current(digest, now)
            SLOT.pack_into(self.map, offset, digest, ends or now + expiry, count)

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
            return self._add(digest, now, expiry, 1)

    def _current(self, digest: bytes, now: float) -> tuple[int, float | None, int]:
        """The offset of the slot for `digest`, the end of its live window (None: it has
        none, a new one starts) and its count there (0 when none)."""
        offset = self._slot(digest, now)
        held, ends, count = SLOT.unpack_from(self.map, offset)
        if held != digest or ends <= now:
            return offset, None, 0
        return offset, ends, count

    def _add(self, digest: bytes, now: float, expiry: float, amount: int) -> int:
        offset, ends, count = self._current(digest, now)
        SLOT.pack_into(self.map, offset, digest, ends or now + expiry, count + amount)
        return count + amount

    def _take_back(self, digest: bytes, now: float) -> None:
        offset, ends, count = self._current(digest, now)
        if ends is not None and count > 0:
            SLOT.pack_into(self.map, offset, digest, ends, count - 1)

    def generation(self) -> int:
        """The generation of what the checks read: one load from the mapped file (a word
        written in one aligned store, under the lock)."""
        return GENERATION.unpack_from(self.map, SLOTS_END)[0]

    def bump(self) -> None:
        """The next generation: every worker's rows of keys are stale."""
        with self.locked:
            GENERATION.pack_into(self.map, SLOTS_END, self.generation() + 1)

    def get(self, key: str) -> int:
        return self._read(key)[1]

    def get_expiry(self, key: str) -> float:
        return self._read(key)[0]

    def check(self) -> bool:
        return True

    def reset(self) -> int:
        with self.locked:
            self.map[HEADER.size : SLOTS_END] = bytes(SLOTS_END - HEADER.size)
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
            _, ends, count = self._current(digest, now)
        return (now, 0) if ends is None else (ends, count)

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
