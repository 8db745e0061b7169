"""The rows of the keys this worker has seen: a check finds its key's row here, read under
the generation that is current, instead of reading the database, while the promise holds
(docs/design.md, "Many hosts"): no row outlives a change, on any worker of any host, once
the change is answered.

The generation lives where the host's counts do (app/access/counting: this host's file, read
by a load from memory; Redis across hosts, read in the round trip that counts the request's
attempt). Every commit that changes what a check reads (a key's row, an identity's, an
organization's) bumps it, after the commit and before the answer, in one place: the
session's events below, which see every write the service makes through db.session,
whichever module makes it. A row read before a bump is never served after it: each row keeps
the generation read before its read.

While the generation cannot be read (Redis silent; `memory://`, which no other process, a
command included, can bump) every check reads the database, and the rows seen before are
dropped. What no bump tells (a change made by hand in SQL, hosts that count apart) is seen
at the latest ROW_SECONDS after a row was read: no row is served longer.

A generation read unchanged proves nothing changed only if every bump reached Redis: a
worker that had no request while Redis was stopped keeps its rows, and reads the same
generation once Redis answers again. So a change of rows a check may have read (an update
or a delete; a row only added is read at its first check) whose bump Redis does not take
is not answered until it can be: its commit returns once Redis takes the bump (asked
every ASK_SECONDS) or ROW_SECONDS after the commit, when no row read before it is served by
any worker of any host. Nothing that follows the commit (the answer, an idempotent answer
stored for a retry, a command's output) comes sooner; the transaction is over, so no row
or lock is held meanwhile.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime

from flask import Flask, current_app
from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session, UOWTransaction

from app.extensions import db
from app.storage import queries
from app.storage.models import ApiKey, Identity, Organization
from app.storage.queries import Holder

# The longest a row is served after its read, whatever the generation: the bound on what no
# bump tells (a change made by hand, hosts counting apart), and the longest a change whose
# bump Redis does not take waits for its answer.
ROW_SECONDS = 5.0
# Seconds between two tries of such a bump; and a margin for the clocks of other hosts.
ASK_SECONDS = 0.25
MARGIN_SECONDS = 0.05
# The most rows a worker keeps: past it, the first seen goes. A row with its strings is up
# to about 2 KiB: at most 2 MiB of a worker's memory (bench/README.md, "A worker's memory").
MOST_ROWS = 1024
# The tables whose rows a check reads.
_READ = frozenset(model.__table__.name for model in (ApiKey, Identity, Organization))
# Set on a write of those tables that changes nothing a check decides from (last_used).
UNSEEN = "unseen_by_checks"
_CHANGED = "changes_what_checks_read"
_STALE = "changes_rows_seen"  # an update or a delete of those tables: rows seen may be stale


class Seen:
    """A worker's rows of keys, by digest (and whether the read had the facts), each with
    the generation read before it was and when (time.monotonic())."""

    def __init__(self) -> None:
        self.rows: dict[bytes, tuple[int, float, Holder]] = {}
        # When this worker last wrote a key's last_used, by identifier: the rows keep the
        # time they were read with.
        self.used: dict[str, datetime] = {}

    def holder(self, digest: bytes, facts: bool, generation: int | None) -> Holder | None:
        """The key with this digest as the database has it under `generation` (None:
        unknown, so read, and every row seen before dropped)."""
        if generation is None:
            self.rows.clear()
            return queries.holder(digest, facts)
        seen_as = digest + b"+" if facts else digest
        row = self.rows.get(seen_as)
        now = time.monotonic()
        if row is not None and row[0] == generation and now - row[1] < ROW_SECONDS:
            return row[2]
        found = queries.holder(digest, facts)
        if found is not None:
            if len(self.rows) >= MOST_ROWS:
                # The first seen; another thread of a threaded worker may take it first.
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                    del self.rows[next(iter(self.rows))]
            self.rows[seen_as] = (generation, now, found)
        return found

    def last_used(self, holder: Holder) -> datetime | None:
        """When `holder` was last used, as its row or this worker's last write of it says."""
        written = self.used.get(holder.caller.identifier)
        if written is None or (holder.last_used is not None and holder.last_used > written):
            return holder.last_used
        return written

    def note_use(self, identifier: str, now: datetime) -> None:
        if len(self.used) >= MOST_ROWS:
            self.used.clear()
        self.used[identifier] = now


def seen() -> Seen:
    return current_app.extensions["seen"]


def _read(rows) -> bool:
    return any(row.__table__.name in _READ for row in rows)


def _after_flush(session: Session, _: UOWTransaction) -> None:
    """Rows of the ORM written: a change of what checks read when one is a key's, an
    identity's or an organization's."""
    altered = [*session.deleted, *(row for row in session.dirty if session.is_modified(row))]
    if _read(altered):
        session.info[_CHANGED] = session.info[_STALE] = True
    elif _read(session.new):
        session.info[_CHANGED] = True


def _on_execute(state: ORMExecuteState) -> None:
    """A statement run through the session: an INSERT, UPDATE or DELETE of those tables
    changes what checks read, unless it says it does not (UNSEEN)."""
    if state.is_insert or state.is_update or state.is_delete:
        table = getattr(state.statement, "table", None)
        if table is not None and table.name in _READ and not state.execution_options.get(UNSEEN):
            state.session.info[_CHANGED] = True
            if not state.is_insert:
                state.session.info[_STALE] = True


def _after_commit(session: Session) -> None:
    """The commit is done: the next generation, so that no worker serves a row read before.
    Where Redis does not take it, a change of rows seen returns once it does (asked every
    ASK_SECONDS) or once ROW_SECONDS have passed since the commit."""
    committed = time.monotonic()
    stale = session.info.pop(_STALE, False)
    if not session.info.pop(_CHANGED, False):
        return
    limits = current_app.extensions["limits"]
    if limits.bump() or not stale:
        return
    until = committed + ROW_SECONDS + MARGIN_SECONDS
    while (left := until - time.monotonic()) > 0:
        time.sleep(min(ASK_SECONDS, left))
        if limits.bump():
            return


_EVENTS = (
    ("after_flush", _after_flush),
    ("do_orm_execute", _on_execute),
    ("after_commit", _after_commit),
)


def init_app(app: Flask) -> None:
    app.extensions["seen"] = Seen()
    for name, listener in _EVENTS:
        if not event.contains(db.session, name, listener):
            event.listen(db.session, name, listener)
