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
dropped: a write made meanwhile bumped nothing; its worker owes the bump and makes it as
soon as Redis answers it again. What no bump tells (a change made by hand in SQL, a bump
that Redis did not take while other hosts reach it, hosts that count apart) is seen at the
latest ROW_SECONDS after a row was read: no row is served longer.
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
# bump tells (a change made by hand, a bump Redis did not take, hosts counting apart).
ROW_SECONDS = 5.0
# The most rows a worker keeps: past it, the first seen goes. A row with its strings is up
# to about 2 KiB: at most 2 MiB of a worker's memory (bench/README.md, "A worker's memory").
MOST_ROWS = 1024
# The tables whose rows a check reads.
_READ = frozenset(model.__table__.name for model in (ApiKey, Identity, Organization))
# Set on a write of those tables that changes nothing a check decides from (last_used).
UNSEEN = "unseen_by_checks"
_CHANGED = "changes_what_checks_read"


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


def _after_flush(session: Session, _: UOWTransaction) -> None:
    """Rows of the ORM written: a change of what checks read when one is a key's, an
    identity's or an organization's."""
    changed = [*session.new, *session.deleted]
    changed += [row for row in session.dirty if session.is_modified(row)]
    if any(row.__table__.name in _READ for row in changed):
        session.info[_CHANGED] = True


def _on_execute(state: ORMExecuteState) -> None:
    """A statement run through the session: an INSERT, UPDATE or DELETE of those tables
    changes what checks read, unless it says it does not (UNSEEN)."""
    if state.is_insert or state.is_update or state.is_delete:
        table = getattr(state.statement, "table", None)
        if table is not None and table.name in _READ and not state.execution_options.get(UNSEEN):
            state.session.info[_CHANGED] = True


def _after_commit(session: Session) -> None:
    """The commit is done: the next generation, so that no worker serves a row read before."""
    if session.info.pop(_CHANGED, False):
        current_app.extensions["limits"].bump()


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
