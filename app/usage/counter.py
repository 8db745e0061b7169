"""Per-key usage (CONTRACT.md section 16), counted without a write per request: each worker
adds every check of a key to a dictionary in its memory, (key, UTC hour, outcome, checked
scope) -> count, and a thread of its own writes the dictionary in one batch of upserts every
USAGE_FLUSH_SECONDS, and once more when the worker stops gracefully (gunicorn's worker_exit
hook, atexit for `flask run`). A worker killed outright loses what it counted since its last
batch, never more.

What is counted is what each door decided, as app/access/auth.py's `checked` records it in
app/serving/verdicts.py (the record the metrics read too): per request and door, the last verdict on
the key found there, so a key let through and then refused for its kind or scopes is one
refusal. The record is read once, when the answer starts, by the one wrapper that also feeds
the metrics: one lock and one clock read per request, no take-back of a replaced verdict.
Measured: app/serving/verdicts.py.

The thread starts with the first count of each process, so never in gunicorn's master (which
serves nothing), and again in a forked child; it holds its counter weakly and ends when the
application is gone. Old hours are pruned by the batches, at most once an hour.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from datetime import datetime, timedelta

from flask import Flask
from sqlalchemy import DateTime, Integer, String, bindparam, delete, select
from sqlalchemy.exc import SQLAlchemyError

from app.domain.scopes import to_names
from app.domain.timestamps import utcnow
from app.extensions import db
from app.serving import verdicts
from app.serving.verdicts import Verdicts
from app.storage import database
from app.storage.models import ApiKey, KeyUsage

EXTENSION = "usage"
ALLOWED = verdicts.ALLOWED
# The scope of a use itself, beside the rows of the scopes its door checked.
USE = ""
_EPOCH = datetime(1970, 1, 1)
PRUNE_SECONDS = 3600

log = logging.getLogger(__name__)

# A count's key: the key's id, its hour (hours since 1970), the outcome, the scope.
Row = tuple[int, int, str, str]


class Usage:
    """One application's counts in this process, and the thread that writes them."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.flush_seconds: float = app.config["USAGE_FLUSH_SECONDS"]
        self.retention = timedelta(days=app.config["USAGE_RETENTION_DAYS"])
        self.forked()
        _counters.add(self)

    def forked(self) -> None:
        """A new process's state: no counts, no thread (a forked child has none running)."""
        self.lock = threading.Lock()
        self.counts: dict[Row, int] = {}
        self.thread: threading.Thread | None = None
        self.stopped = threading.Event()
        self.pruned = 0.0  # time.monotonic() of the last pruning; 0: not yet

    def add(self, environ: dict, status: int, seconds: float, doors: Verdicts) -> None:
        """A request whose answer starts (app/serving/verdicts.py's wrapper calls it): each door's
        last verdict on a key counted, with the scopes it checked when it let the key
        through."""
        if not doors:
            return
        hour = int(time.time() // 3600)
        with self.lock:
            counts = self.counts
            for key, outcome, scopes in doors.values():
                if key is None:
                    continue
                row = (key, hour, outcome, USE)
                counts[row] = counts.get(row, 0) + 1
                if scopes and outcome == ALLOWED:
                    for scope in to_names(scopes):
                        row = (key, hour, outcome, scope)
                        counts[row] = counts.get(row, 0) + 1
        if self.thread is None:
            self.start()

    def start(self) -> None:
        with self.lock:
            if self.thread is not None:
                return
            self.thread = threading.Thread(
                target=_flushing,
                args=(weakref.ref(self), self.flush_seconds, self.stopped),
                name="api-keys-usage",
                daemon=True,
            )
        self.thread.start()

    def stop(self) -> None:
        """End the thread, dropping what it has not written: an application given up before
        its process ends (a test's) must not write later through an engine since disposed,
        which would open a connection that nobody closes."""
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()
        with self.lock:
            self.counts = {}
        _counters.discard(self)

    def flush(self) -> None:
        """Write the counts so far in one transaction (kept for the next batch when the
        database fails), pruning old hours when an hour has passed since this worker last
        did; nothing at all when there is nothing to write. The rows go in the order of
        their key (the table's primary key), so that every worker's batch locks the rows it
        shares with another's in the same order: PostgreSQL found deadlocks between batches
        written in each worker's own order of counting."""
        with self.lock:
            counts, self.counts = self.counts, {}
        rows = [
            {
                "key_id": key,
                "hour": _EPOCH + timedelta(hours=hour),
                "outcome": outcome,
                "scope": scope,
                "count": count,
            }
            for (key, hour, outcome, scope), count in sorted(counts.items())
            if count
        ]
        if not rows:
            return
        prune = time.monotonic() - self.pruned >= PRUNE_SECONDS or not self.pruned
        try:
            with self.app.app_context(), db.engine.begin() as connection:
                connection.execute(_upsert(connection.dialect.name), rows)
                if prune:
                    cutoff = utcnow() - self.retention
                    connection.execute(delete(KeyUsage).where(KeyUsage.hour < cutoff))
        except SQLAlchemyError:
            log.warning("usage: %d counts not written, kept for the next batch", len(rows))
            with self.lock:
                for row, count in counts.items():
                    self.counts[row] = self.counts.get(row, 0) + count
            return
        if prune:
            self.pruned = time.monotonic()


def _flushing(counter: weakref.ref[Usage], seconds: float, stopped: threading.Event) -> None:
    """The thread: a batch every `seconds`, until its application is gone or stopped."""
    while not stopped.wait(seconds):
        usage = counter()
        if usage is None:
            return
        try:
            usage.flush()
        except Exception:  # the thread must outlive any one batch
            log.exception("usage: a batch failed")
        del usage


# Every counter of this process, for flush_all and for the fork hook.
_counters: weakref.WeakSet[Usage] = weakref.WeakSet()


def _after_fork() -> None:
    for usage in list(_counters):
        usage.forked()


os.register_at_fork(after_in_child=_after_fork)


def flush_all() -> None:
    """Every application's counts written now: gunicorn's worker_exit hook calls it, and
    atexit (for `flask run`)."""
    for usage in list(_counters):
        usage.flush()


atexit.register(flush_all)


def _upsert(dialect: str):
    """INSERT ... SELECT the key's id (no row for a key deleted since) ... ON CONFLICT DO
    UPDATE count = count + the batch's: one statement, run for every row of a batch."""
    source = select(
        ApiKey.id,
        bindparam("hour", type_=DateTime()),
        bindparam("outcome", type_=String()),
        bindparam("scope", type_=String()),
        bindparam("count", type_=Integer()),
    ).where(ApiKey.id == bindparam("key_id"))
    statement = database.insert(KeyUsage, dialect).from_select(
        ["key_id", "hour", "outcome", "scope", "count"], source
    )
    return statement.on_conflict_do_update(
        index_elements=["key_id", "hour", "outcome", "scope"],
        set_={"count": KeyUsage.count + statement.excluded.count},
    )


def init_app(app: Flask) -> None:
    """Count every check of a key in `app` (unless USAGE_ENABLED is false)."""
    if app.config["USAGE_ENABLED"]:
        usage = app.extensions[EXTENSION] = Usage(app)
        verdicts.count(app, usage.add)


def flush(app: Flask) -> None:
    """`app`'s counts written now (tests, and anything that cannot wait for the thread)."""
    usage = app.extensions.get(EXTENSION)
    if usage is not None:
        usage.flush()


def stop(app: Flask) -> None:
    """`app`'s thread ended, its unwritten counts dropped (tests, as they dispose of `app`)."""
    usage = app.extensions.get(EXTENSION)
    if usage is not None:
        usage.stop()


def stop_all() -> None:
    """Every application's thread ended, their unwritten counts dropped: for a process that
    gives up its applications as it goes (the test suite, after each test), so that none
    writes later through an engine since disposed, nor at exit."""
    for usage in list(_counters):
        usage.stop()
