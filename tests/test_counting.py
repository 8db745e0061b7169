"""The counts every limit shares on a host (app/access/counting; docs/design.md, "Promises kept by
default"): one file that every process of the host counts in, exactly, whatever process dies."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import time
from pathlib import Path

import pytest

from app import create_app
from app.access import counting
from app.access.counting.host import HostCounts
from app.access.counting.windows import Counter


@pytest.fixture
def counts(tmp_path) -> HostCounts:
    host = HostCounts(f"host://{tmp_path}/limits.counts")
    yield host
    host.close()


def test_a_counter_counts_within_its_window_and_restarts_after_it(counts):
    assert [counts.incr("a", 0.2), counts.incr("a", 0.2), counts.incr("a", 0.2, amount=3)] == [
        1,
        2,
        5,
    ]
    assert counts.get("a") == 5
    assert 0 < counts.get_expiry("a") - time.time() <= 0.2
    assert counts.get("b") == 0
    time.sleep(0.25)
    assert counts.get("a") == 0  # the window has ended
    assert counts.incr("a", 60) == 1  # a new one


def test_clear_and_reset_forget_counts(counts):
    counts.incr("a", 60)
    counts.incr("b", 60)
    counts.clear("a")
    assert (counts.get("a"), counts.get("b")) == (0, 1)
    counts.reset()
    assert counts.get("b") == 0
    assert counts.check()


def _storages(tmp_path):
    yield HostCounts(f"host://{tmp_path}/limits.counts")
    yield counting.MemoryCounts()
    if redis_url := os.environ.get("TEST_REDIS_URL"):
        redis = counting.storage(redis_url, {"key_prefix": f"exchange-{os.getpid()}"}, "")
        redis.get_connection().script_flush()  # the script loaded by its first use
        yield redis


def test_exchange_gives_an_attempt_back_and_counts_a_use(tmp_path):
    """A valid key's request (app/access/limits.py forgive_and_count): its address's attempt given
    back within its window, the key's request counted in a window of its own."""
    for storage in _storages(tmp_path):
        storage.reset()
        storage.incr("attempts", 60, amount=2)
        assert counting.exchange(storage, "attempts", "uses", 0.5) == 1
        assert counting.exchange(storage, "attempts", "uses", 0.5) == 2
        assert counting.exchange(storage, "attempts", "uses", 0.5) == 3
        assert (storage.get("attempts"), storage.get("uses")) == (0, 3), storage
        assert storage.get_expiry("uses") <= time.time() + 1.0
        storage.incr("ended", 1)
        time.sleep(1.1)  # both windows end (Redis counts whole seconds)
        assert counting.exchange(storage, "ended", "uses", 60) == 1  # a new window
        assert storage.get("ended") == 0, storage  # nothing taken back from an ended window
        counting.give_back(storage, "uses")  # a key its holder has spent: only given back
        counting.give_back(storage, "uses")
        assert storage.get("uses") == 0, storage  # never below nothing
        storage.reset()
        if isinstance(storage, HostCounts):
            storage.close()


def test_on_the_hosts_file_an_exchange_takes_the_lock_once(counts):
    """Giving back and counting are one operation: two would let a count of another
    process fall between them, and cost a lock more."""
    taken = []
    lock = counts.locked

    class Counted:
        def __enter__(self) -> None:
            taken.append(1)
            lock.__enter__()

        def __exit__(self, *exc: object) -> None:
            lock.__exit__(*exc)

    counts.incr("attempts", 60)
    counts.locked = Counted()
    assert counting.exchange(counts, "attempts", "uses", 60) == 1
    assert len(taken) == 1
    assert counts.get("attempts") == 0


def test_two_openings_of_one_file_share_their_counts(counts):
    other = HostCounts(f"host://{counts.path}")
    try:
        counts.incr("shared", 60)
        assert other.incr("shared", 60) == 2
        assert counts.get("shared") == 2
    finally:
        other.close()


def test_counts_survive_the_file_being_opened_again(tmp_path):
    """A restart of the service opens the same file: the windows go on."""
    first = HostCounts(f"host://{tmp_path}/limits.counts")
    first.incr("kept", 3600, amount=7)
    first.close()
    again = HostCounts(f"host://{tmp_path}/limits.counts")
    try:
        assert again.get("kept") == 7
    finally:
        again.close()


def test_a_full_neighbourhood_gives_up_the_counter_that_ends_soonest(counts, monkeypatch):
    """Only PROBES slots are looked at for a key: when all hold live counters, the one whose
    window ends first makes room. With a table of 4 slots, 4 live counters fill it."""
    monkeypatch.setattr(counts, "mask", 3)
    for name, seconds in [("w", 50), ("x", 10), ("y", 70), ("z", 90)]:
        counts.incr(name, seconds)
    assert counts.incr("new", 60) == 1
    assert counts.get("x") == 0  # the soonest to end
    assert [counts.get(name) for name in "wyz"] == [1, 1, 1]
    assert counts.incr("new", 60) == 2


def test_an_ended_counter_makes_room_before_a_live_one(counts, monkeypatch):
    monkeypatch.setattr(counts, "mask", 1)
    counts.incr("short", 0.05)
    counts.incr("long", 60)
    time.sleep(0.06)
    assert counts.incr("new", 60) == 1
    assert counts.get("long") == 1


def test_a_file_of_another_shape_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "limits.counts"
    path.write_bytes(b"something else" * 10)
    with pytest.raises(RuntimeError, match="remove it"):
        HostCounts(f"host://{path}")


def _hammer(path: str, key: str, hits: int, limit: int, start: float) -> int:
    """One process's share of simultaneous uses: how many it was allowed."""
    counts = HostCounts(f"host://{path}")
    while time.time() < start:
        pass
    return sum(counts.incr(key, 60) <= limit for _ in range(hits))


def test_processes_using_one_key_at_once_are_allowed_exactly_the_limit(tmp_path):
    path = str(tmp_path / "limits.counts")
    HostCounts(f"host://{path}").close()
    context = multiprocessing.get_context("spawn")
    for trial in range(5):
        start = time.time() + 1.0
        with context.Pool(4) as pool:
            allowed = pool.starmap(_hammer, [(path, f"key-{trial}", 200, 317, start)] * 4)
        assert sum(allowed) == 317, allowed


def _hold_the_lock(path: str) -> None:
    import fcntl

    counts = HostCounts(f"host://{path}")
    fcntl.lockf(counts.fd, fcntl.LOCK_EX)  # held until the process is killed
    time.sleep(60)


def test_a_process_killed_while_counting_leaves_the_counts_usable(tmp_path):
    """The kernel releases a dead process's lock: the others go on counting, and nothing
    it counted before is lost."""
    path = str(tmp_path / "limits.counts")
    counts = HostCounts(f"host://{path}")
    try:
        counts.incr("kept", 60, amount=3)
        holder = multiprocessing.get_context("spawn").Process(target=_hold_the_lock, args=(path,))
        holder.start()
        time.sleep(1.0)
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
        assert counts.incr("kept", 60) == 4
    finally:
        counts.close()


def test_the_default_is_a_file_in_the_instance_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("RATELIMIT_STORAGE_URI")
    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.sqlite3", "USAGE_ENABLED": False}
    )
    storage = app.extensions["limits"].storage
    assert isinstance(storage, HostCounts)
    assert storage.path == Path(app.instance_path) / counting.FILE_NAME
    storage.close()


@pytest.mark.parametrize(
    ("uri", "kind"),
    [("memory://", counting.MemoryCounts), ("host://{tmp}/elsewhere.counts", HostCounts)],
)
def test_the_uri_chooses_where_to_count(uri, kind, tmp_path):
    storage = counting.storage(uri.format(tmp=tmp_path), {}, str(tmp_path))
    assert isinstance(storage, kind)
    if kind is HostCounts:
        assert storage.path == tmp_path / "elsewhere.counts"
        storage.close()


def _resident_kib(path: Path) -> int:
    """This process's resident pages of the file at `path` (its mappings' Rss), in KiB."""
    resident, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            resident += int(line.split()[1])
    return resident


def test_a_process_holds_a_page_for_each_counter_it_has_used_not_its_neighbours(counts):
    """Counters fall on pages all over the 32 MiB file: a process that the kernel gave the
    16 pages around each page it first touched (fault-around) would hold 64 KiB for most
    new counter, and soon the whole file. It holds the page, 4 KiB."""
    for number in range(500):
        counts.incr(f"key-{number}", 3600)
    counts.spend([Counter(f"key-{n}", 3600, 10) for n in range(3)])
    assert _resident_kib(counts.path) <= 500 * 4 + 16
    assert [counts.get(f"key-{n}") for n in (0, 1, 2, 499)] == [2, 2, 2, 1]
