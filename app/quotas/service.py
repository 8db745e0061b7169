"""A quota's count where the limits count it (app/access/limits.py), read for the key and
identity objects and set by grants (POST /api/keys/<key>/quota, which app/keys/service.py
audits as key.quota; docs/design.md, "Quotas"). What has a quota (a key, an identity) has
a `counter` (the key's lineage, the identity's), `quota_requests` and `quota_period`."""

from __future__ import annotations

from typing import Protocol

from flask import current_app, g
from sqlalchemy import delete

from app.access.limits import CountsUnavailable, Limits
from app.domain import bindings, periods
from app.domain.timestamps import utcnow
from app.extensions import db
from app.http.errors import ApiError
from app.storage import database, identity_reads
from app.storage.models import QuotaGrant
from app.storage.queries import Key


def _limits() -> Limits:
    return current_app.extensions["limits"]


class Limited(Protocol):
    """A key or an identity, as far as its quota goes."""

    @property
    def counter(self) -> str: ...

    @property
    def quota_requests(self) -> int | None: ...

    @property
    def quota_period(self) -> str | None: ...


def _counter(key: Limited, period: str) -> tuple[str, float, int | None]:
    """Where `key`'s quota counts now, the seconds its window has left, and when it ends."""
    now = utcnow()
    window = periods.window(period, now)
    name = _limits().quota_key(key.counter, window.name)
    reset = None if window.end is None else max(1, int((window.end - now).total_seconds()))
    return name, periods.seconds_left(window.end, now), reset


def _changed(key: Limited, period: str, amount: int) -> None:
    """What a grant changed of `key`'s count in the current `period` recorded, in the
    session's transaction, for a count rebuilt from the usage (app/access/rebuild.py):
    added to what its grants changed in that window, the rows of its earlier windows gone."""
    if not amount:
        return
    window = periods.window(period, utcnow()).name
    db.session.execute(
        delete(QuotaGrant).where(
            QuotaGrant.counter == key.counter,
            QuotaGrant.window_name != window,
            QuotaGrant.window_name != periods.LIFETIME,
        )
    )
    dialect = db.session.get_bind().dialect.name
    recorded = database.insert(QuotaGrant, dialect).values(
        counter=key.counter, window_name=window, amount=amount
    )
    db.session.execute(
        recorded.on_conflict_do_update(
            index_elements=["counter", "window_name"],
            set_={"amount": QuotaGrant.amount + recorded.excluded.amount},
        )
    )


def used(key: Limited, period: str) -> int:
    """The uses `key` has spent in the current `period`."""
    name, _, _ = _counter(key, period)
    return _limits().count(name)


def remaining(key: Limited) -> int | None:
    """What is left of `key`'s quota in the current period; None: it has none, or its count
    cannot be read now (Redis does not answer: the key object still shows its `quota`, and
    an answer that made a key is not lost for want of it)."""
    if key.quota_requests is None or key.quota_period is None:
        return None
    try:
        return max(0, key.quota_requests - used(key, key.quota_period))
    except CountsUnavailable:
        return None


def _identitys(identity_id: int) -> bindings.Bound | None:
    """The quota of the identity `identity_id` (its row's id) as a limit that binds its
    keys; None: none. Read once a request (a page of an identity's keys reads it once)."""
    read: dict[int, bindings.Bound | None] = g.setdefault("identity_quotas", {})
    if identity_id not in read:
        found = identity_reads.identity_quota(identity_id)
        bound = None
        if found is not None and found[1] is not None:
            public_id, requests, period = found
            counter = bindings.identity_counter(public_id)
            bound = bindings.Bound(bindings.IDENTITY, counter, None, None, requests, period)
        read[identity_id] = bound
    return read[identity_id]


def binding(key: Key) -> tuple[int | None, str | None]:
    """What is left of the quota that binds `key` most (the fewest uses left, of its own,
    its makers' and its identity's: each use spends them all) and whose it is
    (bindings.KEY, MAKER or IDENTITY); (None, None) when no quota binds it. What is left is
    None when no count of them can be read now (Redis does not answer); the quota named is
    then the first of them."""
    bound: list[tuple[str, Limited]] = []
    if key.quota_requests is not None:
        bound.append((bindings.KEY, key))
    if key.bound_by:  # most keys: made by no key with limits
        bound += [
            (bindings.MAKER, maker)
            for maker in bindings.makers(key.bound_by)
            if maker.quota_requests is not None
        ]
    identity = None if key.identity_id is None else _identitys(key.identity_id)
    if identity is not None:
        bound.append((bindings.IDENTITY, identity))
    if not bound:
        return None, None
    least: tuple[int | None, str] = (None, bound[0][0])
    for who, limited in bound:
        left = remaining(limited)
        if left is not None and (least[0] is None or left < least[0]):
            least = (left, who)
    return least


def keep_used(key: Limited, period: str) -> None:
    """A quota whose period changes keeps what the key used in the period it had."""
    if key.quota_period is None or key.quota_period == period:
        return
    spent = used(key, key.quota_period)
    name, seconds, _ = _counter(key, period)
    _changed(key, period, _limits().adjust(name, seconds, to=spent))


NO_QUOTA = "This key has no quota: give it one with PUT /api/keys/<key> first."


def grant(key: Limited, data: dict, no_quota: str = NO_QUOTA) -> tuple[int, int]:
    """More uses (`add`) or exactly so many left (`set_remaining`) in the current period of
    a key's (or an identity's) quota: what was left before and after; 409 `no_quota`
    saying `no_quota` for one without a quota."""
    if key.quota_requests is None or key.quota_period is None:
        raise ApiError(409, "no_quota", no_quota)
    name, seconds, _ = _counter(key, key.quota_period)
    spent = _limits().count(name)
    before = max(0, key.quota_requests - spent)
    changed = 0
    if "add" in data:
        if spent > key.quota_requests:  # a quota lowered below what was used: none left
            changed += _limits().adjust(name, seconds, to=key.quota_requests)
        # atomic: uses meanwhile still count
        changed += _limits().adjust(name, seconds, add=-data["add"])
        after = before + data["add"]
    else:
        changed += _limits().adjust(name, seconds, to=key.quota_requests - data["set_remaining"])
        after = data["set_remaining"]
    _changed(key, key.quota_period, changed)
    return before, after
