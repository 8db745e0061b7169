"""Per-key usage (docs/design.md, "Usage"), counted without a write per request: each worker
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

Where the limits count in Redis, each use goes there instead, before its answer starts, and
the batches are taken from there (app/usage/shared.py): a worker killed outright loses none.

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

from app.access import counting
from app.access.limits import Limits
from app.domain.scopes import to_names
from app.domain.timestamps import utcnow
from app.extensions import db
from app.serving import verdicts
from app.serving.verdicts import Verdicts
from app.storage import database
from app.storage.models import ApiKey, KeyUsage, UsageBatch
from app.usage.shared import Row, SharedUsage

EXTENSION = "usage"
ALLOWED = verdicts.ALLOWED
# The scope of a use itself, beside the rows of the scopes its door checked.
USE = ""
_EPOCH = datetime(1970, 1, 1)
PRUNE_SECONDS = 3600

log = logging.getLogger(__name__)


class Usage:
    """One application's counts in this process, and the thread that writes them."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.flush_seconds: float = app.config["USAGE_FLUSH_SECONDS"]
        self.retention = timedelta(days=app.config["USAGE_RETENTION_DAYS"])
        # Where the limits count in Redis, the uses are counted there (app/usage/shared.py).
        self.limits: Limits = app.extensions["limits"]
        scripted = counting.scripted(self.limits.storage)
        self.shared = SharedUsage(self.limits.storage, self.limits.prefix) if scripted else None
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
        through: in Redis while it answers where the limits count there, else in memory."""
        if not doors:
            return
        hour = int(time.time() // 3600)
        if self.shared is not None and self.limits.answers():
            counts = _counted(doors, hour, {})
            try:
                if counts:
                    self.shared.add(counts)
            except self.limits.storage.base_exceptions:
                self._keep(counts)
                self.limits.silent()
        else:
            with self.lock:
                _counted(doors, hour, self.counts)
        if self.thread is None:
            self.start()

    def _keep(self, counts: dict[Row, int]) -> None:
        """`counts` added to this worker's, for its next batch."""
        with self.lock:
            for row, count in counts.items():
                self.counts[row] = self.counts.get(row, 0) + count

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
        """This worker's counts so far written in one transaction (kept for the next batch
        when the database fails), then, where the uses are counted in Redis, the batches
        taken from there, each in one transaction (app/usage/shared.py)."""
        with self.lock:
            counts, self.counts = self.counts, {}
        if counts and not self._write(counts):
            self._keep(counts)
        if self.shared is not None:
            with self.app.app_context():  # the limits' state reports to the app's metrics
                self._take()

    def _take(self) -> None:
        """The batches in Redis written, each removed once written; none while it is silent."""
        if not self.limits.answers():
            return
        try:
            for batch in self.shared.take():
                if self._write(self.shared.counts(batch), batch):
                    self.shared.remove(batch)
        except self.limits.storage.base_exceptions:
            self.limits.silent()

    def _write(self, counts: dict[Row, int], batch: str | None = None) -> bool:
        """`counts` added to key_usage in one transaction, with the id of the Redis `batch`
        they are, unless it is recorded already (then nothing is written), pruning old hours
        when an hour has passed since this worker last did: whether they are written (False:
        the database failed). The rows go in the order of their key (the table's primary
        key), so that every worker's batch locks the rows it shares with another's in the
        same order: PostgreSQL found deadlocks between batches written in each worker's own
        order of counting."""
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
            return True
        prune = time.monotonic() - self.pruned >= PRUNE_SECONDS or not self.pruned
        try:
            with self.app.app_context(), db.engine.begin() as connection:
                dialect = connection.dialect.name
                if batch is not None:
                    recorded = (
                        database.insert(UsageBatch, dialect)
                        .values(id=batch, written=utcnow())
                        .on_conflict_do_nothing()
                        .returning(UsageBatch.id)
                    )
                    if connection.execute(recorded).first() is None:
                        return True  # written before, by a worker killed before it removed it
                connection.execute(_upsert(dialect), rows)
                if prune:
                    cutoff = utcnow() - self.retention
                    connection.execute(delete(KeyUsage).where(KeyUsage.hour < cutoff))
                    connection.execute(delete(UsageBatch).where(UsageBatch.written < cutoff))
        except SQLAlchemyError:
            log.warning("usage: %d counts not written, kept for the next batch", len(rows))
            return False
        if prune:
            self.pruned = time.monotonic()
        return True


def _counted(doors: Verdicts, hour: int, counts: dict[Row, int]) -> dict[Row, int]:
    """Each door's verdict on a key added to `counts` in `hour`: the use, and the scopes the
    door checked and let it through."""
    for key, outcome, scopes in doors.values():
        if key is None:
            continue
        row = (key, hour, outcome, USE)
        counts[row] = counts.get(row, 0) + 1
        if scopes and outcome == ALLOWED:
            for scope in to_names(scopes):
                row = (key, hour, outcome, scope)
                counts[row] = counts.get(row, 0) + 1
    return counts


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
