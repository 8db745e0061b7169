"""The quotas' counts rebuilt from the database after Redis lost them (docs/operations.md,
"When Redis loses its data").

Redis holds a mark of the counts (counting.MARK, under RATELIMIT_KEY_PREFIX), written once
they are all there. A Redis that answers without it has lost them: restarted without
persistence, flushed, failed over to an empty replica (or new: a first start, or an upgrade
from a version without the mark). Every round trip that spends, reads or grants a quota's
count checks the mark in the same script (app/access/counting), and counts nothing without
it; the worker that finds it missing takes the rebuild's lock in Redis (SET NX, expiring
after LOCK_SECONDS, so that a worker killed meanwhile does not hold it for ever) and
rebuilds, while every other use of a quota is answered 503 `counts_unavailable`.

The count of a quota in its current period is the uses of the keys it binds in that period
that spent it, as the usage in the database has them (key_usage: every use but those the
policy refused before spending, UNSPENT), plus what its grants changed in that window
(quota_grants). A count Redis still holds is kept (SET NX): an upgrade, or a mark lost
alone, loses no count. What a loss still costs is the uses not yet written to the database:
those of the usage's hash in Redis, at most USAGE_FLUSH_SECONDS of them. The rate limits'
windows are not rebuilt: each starts again, so a loss lets through at most one window's
allowance more.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from datetime import datetime
from logging import Logger

from limits.storage import Storage
from sqlalchemy import case, func, select
from sqlalchemy.exc import SQLAlchemyError

from app.access.counting import scripted
from app.domain import bindings, periods
from app.domain.timestamps import utcnow
from app.extensions import db
from app.storage.models import ApiKey, Identity, KeyUsage, QuotaGrant

# The refusals of app/access/policy.py that a use meets before it spends a quota (the
# limits spend all of a use's counters or none): the key expired, disabled, used from
# elsewhere, or refused by one of its limits. Every other outcome spent it.
UNSPENT = ("expired_key", "disabled_key", "ip_not_allowed", "rate_limited", "quota_exceeded")
# The rebuild's lock expires after this long: a worker killed while it holds it leaves the
# rebuild to another then.
LOCK_SECONDS = 60
LOCK = "/rebuilding"
# The periods whose counts are rebuilt from the usage's hours, by their current window.
CALENDAR = (periods.DAY, periods.WEEK, periods.MONTH)

# Redis: the lock KEYS[1] released, if it is still this worker's (ARGV[1]).
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
"""

QuotaKey = Callable[[str, str], str]
OK = "ok"
# The state of the counts (/healthz's `counts`) while they are rebuilt.
REBUILDING = "rebuilding"
# A worker that could not rebuild the counts (another holds the lock, or the database
# failed) tries again after this long.
RETRY_SECONDS = 1.0


class Rebuilder:
    """One worker's rebuilds of the quotas' counts in the Redis of `counts`, marked with
    `mark`, their keys made by `quota_key`."""

    def __init__(self, counts: Storage, mark: str, quota_key: QuotaKey, logger: Logger) -> None:
        self.counts = counts
        self.mark = mark
        self.quota_key = quota_key
        self.logger = logger
        self.retry_at = 0.0  # time.monotonic() before which this worker does not try again

    def rebuild(self) -> bool:
        """The counts rebuilt (rebuild()), unless this worker tried in vain within
        RETRY_SECONDS: whether they are there now."""
        if time.monotonic() < self.retry_at:
            return False
        if rebuild(self.counts, self.mark, self.quota_key, self.logger):
            return True
        self.retry_at = time.monotonic() + RETRY_SECONDS
        return False

    def state(self) -> str:
        """OK when Redis holds the counts, or they are rebuilt now (and where they are not
        in Redis); REBUILDING otherwise. The storage's errors raised."""
        if not scripted(self.counts) or marked(self.counts, self.mark) or self.rebuild():
            return OK
        return REBUILDING


def marked(counts: Storage, mark: str) -> bool:
    """Whether Redis holds the mark of its counts."""
    return bool(counts.get_connection().exists(counts.prefixed_key(mark)))


def rebuild(counts: Storage, mark: str, quota_key: QuotaKey, logger: Logger) -> bool:
    """The counts rebuilt in the Redis of `counts` and marked, unless they are marked
    already: whether they are now (False: another worker holds the lock, or the database
    failed, which is logged)."""
    connection = counts.get_connection()
    lock = counts.prefixed_key(mark + LOCK)
    token = secrets.token_hex(16)
    if not connection.set(lock, token, nx=True, ex=LOCK_SECONDS):
        return False
    try:
        if marked(counts, mark):
            return True
        started = time.monotonic()
        try:
            with db.engine.connect() as database:
                rebuilt = counted(database, utcnow(), quota_key)
        except SQLAlchemyError:
            logger.warning("The quotas' counts could not be rebuilt: the database failed")
            return False
        pipeline = connection.pipeline(transaction=False)
        for key, (count, seconds) in rebuilt.items():
            pipeline.set(counts.prefixed_key(key), count, ex=max(1, math.ceil(seconds)), nx=True)
        pipeline.set(counts.prefixed_key(mark), utcnow().isoformat())
        pipeline.execute()
        logger.warning(
            "Redis had lost the quotas' counts: %d rebuilt from the database's usage in %.1f s",
            len(rebuilt),
            time.monotonic() - started,
        )
        return True
    finally:
        connection.register_script(_RELEASE)([lock], [token])


def counted(database, now: datetime, quota_key: QuotaKey) -> dict[str, tuple[int, float]]:
    """Each quota's count in its current window, by where it counts (`quota_key(counter,
    window)`), with the seconds its window has left: the uses of its keys that spent it,
    and its grants."""
    windows = {period: periods.window(period, now) for period in periods.PERIODS}
    starts = {period: periods.start(period, now) for period in CALENDAR}
    spent = (KeyUsage.scope == "") & KeyUsage.outcome.not_in(UNSPENT)
    sums = [
        func.sum(case((KeyUsage.hour >= starts[period], KeyUsage.count), else_=0))
        for period in CALENDAR
    ]
    used = (
        select(KeyUsage.key_id, *sums, func.sum(KeyUsage.count))
        .where(spent)
        .group_by(KeyUsage.key_id)
        .subquery()
    )
    rows = database.execute(
        select(
            ApiKey.identifier,
            ApiKey.quota_counter,
            ApiKey.quota_requests,
            ApiKey.quota_period,
            ApiKey.bound_by,
            Identity.public_id,
            Identity.quota_requests,
            Identity.quota_period,
            *list(used.c)[1:],
        )
        .join(used, used.c.key_id == ApiKey.id)
        .outerjoin(Identity, Identity.id == ApiKey.identity_id)
    )
    totals: dict[str, int] = {}
    names: dict[str, str] = {}  # each count's window
    for row in rows:
        uses = dict(zip((*CALENDAR, periods.LIFETIME), map(int, row[8:]), strict=True))
        quotas = [(bindings.lineage(row[0], row[1]), row[2], row[3])]
        quotas += [(entry[0], entry[3], entry[4]) for entry in row[4] or ()]
        if row[5] is not None:
            quotas.append((bindings.identity_counter(row[5]), row[6], row[7]))
        for counter, requests, period in quotas:
            if requests is not None and period in windows:
                key = quota_key(counter, windows[period].name)
                totals[key] = totals.get(key, 0) + uses[period]
                names[key] = windows[period].name
    current = {window.name: window for window in windows.values()}
    for counter, name, amount in database.execute(
        select(QuotaGrant.counter, QuotaGrant.window_name, QuotaGrant.amount)
    ):
        if name in current:
            key = quota_key(counter, name)
            totals[key] = totals.get(key, 0) + amount
            names[key] = name
    left = {name: periods.seconds_left(window.end, now) for name, window in current.items()}
    return {key: (count, left[names[key]]) for key, count in totals.items()}
