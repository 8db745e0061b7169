"""Delivery (docs/design.md, "Webhooks"), by the service itself: a sender thread in each worker
looks for due tries every WEBHOOK_POLL_SECONDS (at once when its own worker has just
written an event), and for keys whose expiry is to be announced every WEBHOOK_SCAN_SECONDS.

Exactly one worker sends a try. A sender claims one due delivery right before its try, with
one UPDATE that sets its claim (a random token), a lease (WEBHOOK_LEASE_SECONDS, past the
5 s timeout) and the count of tries, and commits before it sends: a lease covers one try,
however slowly its receiver answers (and is renewed under the claim if checking the
target's address took so long that it would end within the try). On PostgreSQL the UPDATE
takes the row from a SELECT ... FOR UPDATE SKIP LOCKED: concurrent senders pass over each
other's rows rather than wait. On SQLite the UPDATE runs in a write transaction (BEGIN
IMMEDIATE, one writer at a time), and a row under lease is not due. The outcome is written
only under the same claim. A worker killed mid-try leaves its lease to run out; another
sender then takes the try over, with the same `webhook-id`: at least once, never lost.

A try succeeds on a 2xx answer; anything else (another status, a redirect, no answer in
5 s, a target no longer public) waits for the next try, after WEBHOOK_RETRY_DELAYS (8 tries
over 27.5 hours by default), and the delivery has failed when they are spent. An endpoint
whose tries have failed without a success for 3 days is disabled, and the audit log says
so (`webhook.disabled`).

Each scan announces what is due (app/webhooks/announcements.py): expiries, each once,
whichever worker finds it (a quota used up is recorded by the use that used it up). Once an
hour a sender removes what is older than WEBHOOK_RETENTION_DAYS (app/webhooks/retention.py).

The thread starts with a worker (gunicorn's post_worker_init) or its first request, never in
gunicorn's master; it holds its sender weakly and ends with its application or stop().
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
import weakref
from datetime import datetime, timedelta
from typing import Any

from flask import Flask
from sqlalchemy import or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from app import audit
from app.audit import outbox as webhook_outbox
from app.audit.outbox import DELIVERED, FAILED, PENDING
from app.domain import timestamps
from app.extensions import db
from app.storage.webhook_models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from app.webhooks import announcements, retention, signatures, targets

EXTENSION = "webhook_sender"
log = logging.getLogger(__name__)

DISABLE_AFTER = timedelta(days=3)
BATCH = 10
# A try's longest (the timeout) and a second for writing its outcome: what a lease must
# still cover when the request goes.
TRY_WITH_MARGIN = timedelta(seconds=targets.TIMEOUT + 1)
PRUNE_SECONDS = 3600
USER_AGENT = "api-keys-service-webhooks"

_DELIVERIES = WebhookDelivery.__table__
_ENDPOINTS = WebhookEndpoint.__table__
_EVENTS = WebhookEvent.__table__


def _due(now: datetime, limit: int = BATCH, locked: bool = True) -> Any:
    """The ids of due tries, oldest due first: pending, not under lease, of an enabled
    endpoint; rows another transaction has locked are skipped (PostgreSQL; SQLite's SQL
    leaves FOR UPDATE out, its write lock serializes the claims)."""
    query = (
        select(_DELIVERIES.c.id)
        .join(_ENDPOINTS, _ENDPOINTS.c.id == _DELIVERIES.c.endpoint_id)
        .where(
            _DELIVERIES.c.status == PENDING,
            _DELIVERIES.c.next_attempt <= now,
            _ENDPOINTS.c.enabled.is_(True),
            or_(_DELIVERIES.c.lease_until.is_(None), _DELIVERIES.c.lease_until <= now),
        )
        .order_by(_DELIVERIES.c.next_attempt, _DELIVERIES.c.id)
        .limit(limit)
    )
    return query.with_for_update(of=_DELIVERIES, skip_locked=True) if locked else query


_CLAIMED = (
    select(
        _DELIVERIES.c.id,
        _DELIVERIES.c.public_id,
        _DELIVERIES.c.tries,
        _DELIVERIES.c.lease_until,
        _EVENTS.c.payload,
        _ENDPOINTS.c.id.label("endpoint_id"),
        _ENDPOINTS.c.public_id.label("endpoint"),
        _ENDPOINTS.c.organization_id,
        _ENDPOINTS.c.url,
        _ENDPOINTS.c.secret,
        _ENDPOINTS.c.previous_secret,
        _ENDPOINTS.c.previous_secret_until,
    )
    .join(_EVENTS, _EVENTS.c.id == _DELIVERIES.c.event_id)
    .join(_ENDPOINTS, _ENDPOINTS.c.id == _DELIVERIES.c.endpoint_id)
)


class Sender:
    """One application's webhook sender in this process, and its thread."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.poll: float = app.config["WEBHOOK_POLL_SECONDS"]
        self.scan: float = app.config["WEBHOOK_SCAN_SECONDS"]
        self.delays: tuple[float, ...] = tuple(app.config["WEBHOOK_RETRY_DELAYS"])
        self.lease = timedelta(seconds=app.config["WEBHOOK_LEASE_SECONDS"])
        self.allow_private: bool = app.config["WEBHOOK_ALLOW_PRIVATE"]
        self.enabled: bool = app.config["WEBHOOK_SENDER_ENABLED"]
        self.retention = timedelta(days=app.config["WEBHOOK_RETENTION_DAYS"])
        self.forked()
        _senders.add(self)

    def forked(self) -> None:
        """A new process's state: no thread (a forked child has none running)."""
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.stopped = threading.Event()
        self.scanned = 0.0  # time.monotonic() of the last scan; 0: not yet
        self.pruned = 0.0  # time.monotonic() of the last pruning; 0: not yet

    def ensure_started(self) -> None:
        """The application's before_request hook: the thread, once per process."""
        if self.thread is None:
            self.start()

    def start(self) -> None:
        with self.lock:
            if self.thread is not None:
                return
            self.thread = threading.Thread(
                target=_running,
                args=(weakref.ref(self), self.poll, self.stopped),
                name="api-keys-webhooks",
                daemon=True,
            )
        self.thread.start()

    def stop(self) -> None:
        """End the thread (after the try it is sending, if any)."""
        self.stopped.set()
        webhook_outbox.written.set()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * targets.TIMEOUT)
        _senders.discard(self)

    def tick(self) -> int:
        """One round: the expiry announcements when a scan is due, then every due try;
        how many tries were sent."""
        if not self.scanned or time.monotonic() - self.scanned >= self.scan:
            self.announce_expiries()
            self.scanned = time.monotonic()
        if not self.pruned or time.monotonic() - self.pruned >= PRUNE_SECONDS:
            self.prune()
            self.pruned = time.monotonic()
        sent = 0
        while not self.stopped.is_set():
            count = self.deliver_due()
            sent += count
            if count < BATCH:
                return sent
        return sent

    def deliver_due(self) -> int:
        """Send up to BATCH due tries, each claimed right before it is sent and its outcome
        written; how many."""
        sent = 0
        while sent < BATCH and not self.stopped.is_set():
            claimed = self.claim()
            if claimed is None:
                break
            self.send(*claimed)
            sent += 1
        return sent

    def claim(self) -> tuple[Any, str] | None:
        """The next due delivery, claimed under a lease and its try counted; None when none
        is due (or another sender took the one found first)."""
        token = secrets.token_hex(12)
        with self.app.app_context():
            now = timestamps.utcnow()
            # A read first: a sender with nothing to send takes no write lock (SQLite has
            # one writer).
            if db.session.execute(_due(now, limit=1, locked=False)).first() is None:
                db.session.commit()
                return None
            claim = (
                update(_DELIVERIES)
                .where(_DELIVERIES.c.id.in_(_due(now, limit=1).scalar_subquery()))
                .values(claim=token, lease_until=now + self.lease, tries=_DELIVERIES.c.tries + 1)
                .returning(_DELIVERIES.c.id)
            )
            claimed = db.session.execute(claim).first()
            db.session.commit()
            if claimed is None:
                return None
            row = db.session.execute(_CLAIMED.where(_DELIVERIES.c.id == claimed.id)).one()
            db.session.commit()
        return row, token

    def held(self, row: Any, token: str) -> bool:
        """Whether the claim covers a whole try from now: its lease renewed first if the
        check before it took so long that the lease would end within the try; False when
        another sender has taken the delivery over meanwhile (the try is then its)."""
        now = timestamps.utcnow()
        if now + TRY_WITH_MARGIN <= row.lease_until:
            return True
        mine = (_DELIVERIES.c.id == row.id) & (_DELIVERIES.c.claim == token)
        with self.app.app_context():
            renewed = db.session.execute(
                update(_DELIVERIES).where(mine).values(lease_until=now + self.lease)
            )
            db.session.commit()
        return renewed.rowcount == 1

    def send(self, row: Any, token: str) -> None:
        """One try of one delivery, and its outcome written under the claim."""
        body = row.payload.encode()
        keys = [row.secret]
        now = timestamps.utcnow()
        if row.previous_secret is not None and row.previous_secret_until > now:
            keys.append(row.previous_secret)
        # The signature's time is the real one (a receiver compares it with its clock).
        headers = signatures.headers(row.public_id, int(time.time()), body, keys)
        headers |= {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        status: int | None = None
        error: str | None = None
        try:
            target = targets.check(row.url, self.allow_private)
            if not self.held(row, token):
                return
            status = targets.post(target, body, headers)
        except targets.UnsafeTarget as refused:
            error = f"target refused: {refused}"[:200]
        except targets.NoAnswerInTime as slow:
            error = f"timed out: {slow}"
        except OSError as failure:
            error = f"no answer: {failure}"[:200] if str(failure) else "no answer"
        if status is not None and not 200 <= status < 300:
            error = f"answered {status}"
        self.finish(row, token, status, error)

    def finish(self, row: Any, token: str, status: int | None, error: str | None) -> None:
        now = timestamps.utcnow()
        values: dict[str, Any] = {
            "last_attempt": now,
            "last_status": status,
            "last_error": error,
            "claim": None,
            "lease_until": None,
        }
        if error is None:
            values["status"] = DELIVERED
        elif row.tries > len(self.delays):
            values["status"] = FAILED
        else:
            values["next_attempt"] = now + timedelta(seconds=self.delays[row.tries - 1])
        mine = (_DELIVERIES.c.id == row.id) & (_DELIVERIES.c.claim == token)
        endpoint = _ENDPOINTS.c.id == row.endpoint_id
        with self.app.app_context():
            db.session.execute(update(_DELIVERIES).where(mine).values(**values))
            if error is None:
                db.session.execute(
                    update(_ENDPOINTS)
                    .where(endpoint, _ENDPOINTS.c.failing_since.is_not(None))
                    .values(failing_since=None)
                )
            else:
                db.session.execute(
                    update(_ENDPOINTS)
                    .where(endpoint, _ENDPOINTS.c.failing_since.is_(None))
                    .values(failing_since=now)
                )
                disabled = db.session.execute(
                    update(_ENDPOINTS)
                    .where(
                        endpoint,
                        _ENDPOINTS.c.enabled.is_(True),
                        _ENDPOINTS.c.failing_since <= now - DISABLE_AFTER,
                    )
                    .values(enabled=False, updated=now)
                )
                if disabled.rowcount:
                    audit.record(
                        "webhook.disabled",
                        organization_id=row.organization_id,
                        actor=audit.OPERATOR,
                        target=row.endpoint,
                        details={"reason": "Its deliveries failed for 3 days.", "last": error},
                    )
            db.session.commit()

    def prune(self) -> int:
        """Remove what is older than WEBHOOK_RETENTION_DAYS (retention.py); how many
        deliveries."""
        return retention.prune(self.app, self.retention)

    def announce_expiries(self) -> int:
        """Each expiry notice reached and not yet announced (announcements.py); how many."""
        return announcements.expiries(self.app)


def _running(sender_ref: weakref.ref[Sender], poll: float, stopped: threading.Event) -> None:
    """The thread: a round at once, then one every `poll` seconds or when this process has
    written an event, until its application is gone or stopped."""
    while not stopped.is_set():
        sender = sender_ref()
        if sender is None:
            return
        try:
            sender.tick()
        except SQLAlchemyError as error:  # the database away: the next round tries again
            log.warning(
                "webhooks: a round failed: %s", type(getattr(error, "orig", None) or error).__name__
            )
        except Exception:  # the thread must outlive any one round
            log.exception("webhooks: a round failed")
        del sender
        webhook_outbox.written.wait(poll)
        webhook_outbox.written.clear()


# Every sender of this process, for start_all, stop_all and the fork hook.
_senders: weakref.WeakSet[Sender] = weakref.WeakSet()


def _after_fork() -> None:
    for sender in list(_senders):
        sender.forked()


os.register_at_fork(after_in_child=_after_fork)


def init_app(app: Flask) -> None:
    """A sender for `app`, whose thread its first request or start_all starts (unless
    WEBHOOK_SENDER_ENABLED is false: then only a caller of its rounds sends)."""
    sender = app.extensions[EXTENSION] = Sender(app)
    if sender.enabled:
        app.before_request(sender.ensure_started)


def start_all() -> None:
    """Every application's sender started: gunicorn's post_worker_init calls it, so that a
    worker sends whether or not requests come."""
    for sender in list(_senders):
        if sender.enabled:
            sender.start()


def stop_all() -> list[Flask]:
    """Every application's sender stopped (a test's applications, a worker's exit); the
    applications whose sender thread had run."""
    ran = []
    for sender in list(_senders):
        if sender.thread is not None:
            ran.append(sender.app)
        sender.stop()
    return ran


def of(app: Flask) -> Sender:
    """`app`'s sender (tests drive it round by round)."""
    return app.extensions[EXTENSION]
