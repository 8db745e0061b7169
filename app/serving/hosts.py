"""Every host records itself in the database (docs/design.md, "Many hosts": per-host counting
is never silently wrong): its id, the scheme of its limits' storage and when it was last seen,
written by each gunicorn worker's thread every HOSTS_HEARTBEAT_SECONDS (started by
gunicorn.conf.py's post_worker_init, whether or not requests come, and never in a request)
and by the first start.

A host that counts in its own file (`host://`) while another host has been seen serving the
same database within three heartbeats would let each holder through once per host: the first
start refuses it, naming `redis://`; a host that finds one later answers /healthz 503 with the
reason, sets the gauge api_keys_counts_apart and logs it once a minute.

A host is the place where its limits count: its name and a digest of its counts file
(host://), or of its instance folder and storage URI, so that processes sharing one counts
file are one host, and a host restarted keeps its id.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import weakref
from datetime import timedelta

from flask import Flask, current_app
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from app.domain.timestamps import utcnow
from app.extensions import db
from app.serving import metrics
from app.storage.models import Host

EXTENSION = "hosts"
# Where the application keeps how its limits are counted: a function that answers "ok",
# "degraded" or "rebuilding" (app/access/limits.py's Limits.state, set by its init_app;
# serving imports nothing of access), asked by /healthz and by each heartbeat.
COUNTS_STATE = "counts_state"
HEARTBEATS = 3  # a host not seen for this many heartbeats no longer serves
WARN_SECONDS = 60.0
FORGET_DAYS = 7  # a host gone this long is removed from the table
_heartbeats: weakref.WeakSet[Heartbeat] = weakref.WeakSet()


def host_id(app: Flask) -> str:
    """This host: its name and a digest of where its limits count (for host://, the file
    itself: processes sharing one file count as one host, wherever their instance folder)."""
    uri = app.config["RATELIMIT_STORAGE_URI"]
    if scheme(app) == "host":
        path = uri.split("://", 1)[1] or os.path.join(app.instance_path, "limits.counts")
        place = os.path.realpath(path)
    else:
        place = f"{os.path.realpath(app.instance_path)}\0{uri}"
    digest = hashlib.sha256(place.encode()).hexdigest()[:16]
    return f"{socket.gethostname()[:80]}:{digest}"


def scheme(app: Flask) -> str:
    return app.config["RATELIMIT_STORAGE_URI"].split(":", 1)[0]


class Heartbeat:
    """One application's heartbeat, in app.extensions["hosts"]."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.thread: threading.Thread | None = None
        self.stopped = threading.Event()
        self.seconds: float = app.config["HOSTS_HEARTBEAT_SECONDS"]
        self.id = host_id(app)
        self.scheme = scheme(app)
        self.logger = app.logger
        self.beaten = 0.0  # time.monotonic() of the last beat; 0: none yet
        self.warned = 0.0
        self.apart: str | None = None  # why this host's counts are wrong, once found

    def due(self) -> bool:
        return self.seconds > 0 and time.monotonic() - self.beaten >= self.seconds

    def beat(self, starting: bool = False) -> str | None:
        """This host seen now; the reason its counts are wrong (another host serves the
        database while it counts in its own file), or None. A first start that is to be
        refused (`starting`) records nothing: it never serves."""
        self.beaten = time.monotonic()
        now = utcnow()
        hosts = Host.__table__
        recent = now - timedelta(seconds=HEARTBEATS * max(self.seconds, 1))
        with db.engine.begin() as connection:
            others = connection.execute(
                select(hosts.c.id, hosts.c.storage).where(
                    hosts.c.id != self.id, hosts.c.last_seen >= recent
                )
            ).all()
            apart = reason(self.scheme, others)
            if not (starting and apart):
                self._record(connection, now)
        self.apart = None if starting else apart
        metrics.counts_apart(self.apart is not None)
        return apart

    def _record(self, connection, now) -> None:
        hosts = Host.__table__
        seen = connection.execute(
            update(hosts).where(hosts.c.id == self.id).values(storage=self.scheme, last_seen=now)
        )
        if seen.rowcount == 0:
            try:
                with connection.begin_nested():
                    connection.execute(
                        insert(hosts).values(id=self.id, storage=self.scheme, last_seen=now)
                    )
            except IntegrityError:
                pass  # another worker of this host wrote it first
        connection.execute(
            delete(hosts).where(hosts.c.last_seen < now - timedelta(days=FORGET_DAYS))
        )

    def check(self) -> None:
        """A heartbeat when one is due (a database that does not answer is logged, and
        tried again at the next), and the log line of a host counting apart."""
        if self.due():
            try:
                self.beat()
            except SQLAlchemyError:
                self.logger.warning("hosts: the heartbeat could not be written", exc_info=True)
            # A worker that serves nothing asks Redis too, so that its gauge
            # (api_keys_counts_degraded) says when Redis answers again.
            if state := self.app.extensions.get(COUNTS_STATE):
                state()
        if self.apart and time.monotonic() - self.warned >= WARN_SECONDS:
            self.warned = time.monotonic()
            self.logger.warning("%s", self.apart)

    def start(self) -> None:
        if self.thread is None and self.seconds > 0:
            self.thread = threading.Thread(target=self._beating, name="api-keys-hosts", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()

    def _beating(self) -> None:
        while not self.stopped.is_set():
            with self.app.app_context():
                self.check()
            self.stopped.wait(max(0.1, self.seconds - (time.monotonic() - self.beaten)))


def start_all() -> None:
    """Every application's heartbeat thread started (gunicorn's post_worker_init)."""
    for heartbeat in list(_heartbeats):
        heartbeat.start()


def stop_all() -> None:
    """Every application's heartbeat thread stopped (a worker's exit)."""
    for heartbeat in list(_heartbeats):
        heartbeat.stop()


def reason(own_scheme: str, others: list) -> str | None:
    """Why a host of `own_scheme` cannot keep its limits beside the hosts `others` (their
    ids and schemes, seen recently), or None."""
    if own_scheme != "host" or not others:
        return None
    names = ", ".join(sorted(str(other[0]) for other in others)[:3])
    return (
        f"RATELIMIT_STORAGE_URI=host:// counts the limits in this host's own file, but another "
        f"host ({names}) serves the same database: each holder would get its limits once per "
        "host. Set RATELIMIT_STORAGE_URI=redis://... on every host."
    )


def refuse_counting_apart(app: Flask) -> None:
    """The first start: this host recorded, and refused when it would count apart."""
    if app.config["HOSTS_HEARTBEAT_SECONDS"] <= 0:
        return
    with app.app_context():
        apart = Heartbeat(app).beat(starting=True)
    if apart:
        raise RuntimeError(apart)


def init_app(app: Flask) -> None:
    heartbeat = app.extensions[EXTENSION] = Heartbeat(app)
    _heartbeats.add(heartbeat)


def apart() -> str | None:
    """Why this host's counts are wrong, as its last heartbeat found, or None."""
    heartbeat: Heartbeat | None = current_app.extensions.get(EXTENSION)
    return None if heartbeat is None else heartbeat.apart
