"""A key's usage over a window (GET /api/keys/<key>/usage, the MCP tool get_key_usage): one
grouped query on key_usage's primary key (key_id, hour), added up in Python into buckets."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from app.domain.credentials import Caller
from app.domain.keyformat import shown
from app.domain.scopes import SCOPES, to_names
from app.domain.timestamps import iso, utcnow
from app.extensions import db
from app.keys import service
from app.storage.models import ApiKey, KeyUsage
from app.usage.counter import ALLOWED, USE

HOUR = "hour"
DAY = "day"
GRANULARITIES = {HOUR: timedelta(hours=1), DAY: timedelta(days=1)}
DEFAULT_WINDOW = timedelta(days=30)
LONGEST_WINDOW = timedelta(days=90)


def window(
    since: datetime | None, until: datetime | None, granularity: str
) -> tuple[datetime, datetime]:
    """The window asked for (until: now; since: 30 days before until), widened to whole
    buckets: since down to its bucket's start, until up to its bucket's end."""
    until = until or utcnow()
    since = since or until - DEFAULT_WINDOW
    step = GRANULARITIES[granularity]
    start = _floor(since, granularity)
    end = _floor(until, granularity)
    if end < until or end == start:
        end += step
    return start, end


def _floor(moment: datetime, granularity: str) -> datetime:
    hour = moment.replace(minute=0, second=0, microsecond=0)
    return hour if granularity == HOUR else hour.replace(hour=0)


def key_usage(
    caller: Caller,
    reference: str,
    since: datetime | None = None,
    until: datetime | None = None,
    granularity: str = DAY,
) -> dict[str, Any]:
    """The usage of the caller's organization's key named by `reference` (404 for any other)
    in the window, as the API shows it."""
    key = service.find_key(caller, reference)
    counted = _usage(KeyUsage.key_id == key.id, since, until, granularity)
    scopes = counted.pop("scopes")
    held = to_names(key.scope_bits)
    return {"key": shown(key.identifier), **counted} | {
        "scopes": scopes,
        "unused_scopes": [name for name in held if name not in scopes] if scopes else None,
    }


def identity_usage(
    identity_id: int,
    shown_id: str,
    since: datetime | None = None,
    until: datetime | None = None,
    granularity: str = DAY,
) -> dict[str, Any]:
    """The usage of every key an identity holds now (its row's `identity_id`; shown as
    `shown_id`), added up, in the window, as the API shows a key's."""
    keys = select(ApiKey.id).where(ApiKey.identity_id == identity_id)
    return {"identity": shown_id, **_usage(KeyUsage.key_id.in_(keys), since, until, granularity)}


def _usage(
    of: Any, since: datetime | None, until: datetime | None, granularity: str
) -> dict[str, Any]:
    """The counts of the keys `of` selects in the window, by bucket: allowed, refused by
    code, and the scopes checked."""
    start, end = window(since, until, granularity)
    statement = (
        select(KeyUsage.hour, KeyUsage.outcome, KeyUsage.scope, func.sum(KeyUsage.count))
        .where(of, KeyUsage.hour >= start, KeyUsage.hour < end)
        .group_by(KeyUsage.hour, KeyUsage.outcome, KeyUsage.scope)
    )
    step = GRANULARITIES[granularity]
    buckets: list[dict[str, Any]] = []
    moment = start
    while moment < end:
        buckets.append({"start": moment, "allowed": 0, "refused": {}})
        moment += step
    allowed = 0
    refused: dict[str, int] = {}
    scopes: dict[str, int] = {}
    for hour, outcome, scope, count in db.session.execute(statement):
        if scope != USE:
            scopes[scope] = scopes.get(scope, 0) + count
            continue
        bucket = buckets[int((hour - start) / step)]
        if outcome == ALLOWED:
            bucket["allowed"] += count
            allowed += count
        else:
            bucket["refused"][outcome] = bucket["refused"].get(outcome, 0) + count
            refused[outcome] = refused.get(outcome, 0) + count
    for bucket in buckets:
        bucket["start"] = iso(bucket["start"])
    return {
        "since": iso(start),
        "until": iso(end),
        "granularity": granularity,
        "total": {"allowed": allowed, "refused": refused},
        "buckets": buckets,
        "scopes": {name: scopes[name] for name in SCOPES if name in scopes},
    }
