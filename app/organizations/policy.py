"""An organization's own policy (docs/design.md, "Organization policy"): what it is, the operator's
change of it, and how it bounds the keys the organization's keys make or change. The key service
asks govern() once per write of a key; nothing else here writes.

- `max_keys`: the most keys the organization may hold, whatever their state (expired and
  rotated keys count until they are deleted). A write that would add one more is refused
  with 409 `key_limit_reached`, decided inside the write's transaction with the
  organization's row locked, so that concurrent creates never pass it.
- `max_key_lifetime_days`: every expiry a request names (a new key's, a successor's, an
  update's) must be at most that many days from now, else 403 `organization_policy`; a new
  key or successor that names none gets the latest it may have.
- `default_rate_limit` and `default_quota`: the rate limit and the quota of a key made
  without naming one (within its caller's, app/keys/bounds.py).

The policy applies to what is made or changed after it is set: existing keys outside it
stay as they are, listed by `GET /api/keys?outside_policy=true` (app/storage/queries.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import func, select, update

from app.domain.credentials import Caller
from app.domain.scopes import SDK_INTEGRATION
from app.domain.timestamps import utcnow
from app.extensions import db
from app.http.errors import ApiError
from app.storage import database, queries
from app.storage.models import KeyCount, Organization

# The bounds of each rule the operator sets.
MAX_KEYS = 100_000
MAX_LIFETIME_DAYS = 3650
# The rules as the CLI and the API name them.
RULES = ("max_keys", "max_key_lifetime_days", "default_rate_limit", "default_quota")
# The writes of a key that govern() judges.
CREATE, ROTATE, UPDATE = "create", "rotate", "update"

_ORGANIZATIONS = Organization.__table__
_COUNTS = KeyCount.__table__


class Policy(NamedTuple):
    """An organization's rules; None: no such rule."""

    max_keys: int | None = None
    max_key_lifetime_days: int | None = None
    default_rate_limit_requests: int | None = None
    default_rate_limit_seconds: int | None = None
    default_quota_requests: int | None = None
    default_quota_period: str | None = None

    @property
    def default_quota(self) -> dict[str, int | str] | None:
        if self.default_quota_requests is None:
            return None
        return {"requests": self.default_quota_requests, "period": self.default_quota_period}

    @property
    def default_rate_limit(self) -> dict[str, int] | None:
        if self.default_rate_limit_requests is None:
            return None
        return {
            "requests": self.default_rate_limit_requests,
            "seconds": self.default_rate_limit_seconds,
        }

    def latest_expiry(self, now: datetime) -> datetime | None:
        """The latest a key made or changed at `now` may expire, to the second (as people
        read it in a refusal); None: any time, or never."""
        if self.max_key_lifetime_days is None:
            return None
        return now.replace(microsecond=0) + timedelta(days=self.max_key_lifetime_days)


class Summary(NamedTuple):
    """An organization as GET /api/organization and `flask org policy` show it."""

    name: str
    created: datetime
    key_count: int
    policy: Policy


class Governed(NamedTuple):
    """What a key made or changed gets from the policy where its request names nothing."""

    expires_at: datetime | None
    rate_limit: dict[str, int] | None
    quota: dict[str, int | str] | None = None


_POLICY = tuple(_ORGANIZATIONS.c[name] for name in Policy._fields)


def _key_count(organization_id: int) -> int:
    """How many keys the organization holds (models.KeyCount, kept by the database)."""
    total = select(func.coalesce(func.sum(_COUNTS.c.total), 0))
    return db.session.scalar(total.where(_COUNTS.c.organization_id == organization_id))


def of(organization_id: int) -> Policy:
    """The organization's policy, as committed now."""
    query = select(*_POLICY).where(_ORGANIZATIONS.c.id == organization_id)
    return Policy(*db.session.execute(query).one())


def _locked(organization_id: int) -> Policy:
    """The organization's policy, its row locked until the transaction ends: two writes
    that add keys to one organization take turns from here, so that the second counts the
    first's key. PostgreSQL: SELECT ... FOR NO KEY UPDATE (which other transactions'
    foreign keys to the row do not wait for); then the count, a statement of its own, reads
    what the previous holder committed (READ COMMITTED). SQLite: the write lock, taken
    before the read (database.writing)."""
    query = (
        select(*_POLICY)
        .where(_ORGANIZATIONS.c.id == organization_id)
        .with_for_update(key_share=True)
    )
    return Policy(*database.writing().execute(query).one())


def summary(organization_id: int) -> Summary:
    """The organization's name, creation, number of keys and policy."""
    query = select(_ORGANIZATIONS.c.name, _ORGANIZATIONS.c.created, *_POLICY).where(
        _ORGANIZATIONS.c.id == organization_id
    )
    name, created, *policy = db.session.execute(query).one()
    return Summary(name, created, _key_count(organization_id), Policy(*policy))


def set_policy(name: str, changes: dict) -> Summary:
    """The operator's change of organization `name`'s rules (`changes`: a rule's name ->
    its new value, None to clear it; the others stay); LookupError for an unknown
    organization, nothing written."""
    organization_id = queries.organization_id(name)
    if organization_id is None:
        raise LookupError(f'no organization is named "{name}"')
    columns = {
        column: value
        for rule, value in changes.items()
        for column, value in _columns(rule, value).items()
    }
    if columns:
        statement = update(Organization).where(Organization.id == organization_id)
        db.session.execute(statement.values(**columns))
        db.session.commit()
    return summary(organization_id)


def _columns(rule: str, value: object) -> dict[str, object]:
    if rule == "default_rate_limit":
        limit = value if isinstance(value, dict) else {}
        return {
            "default_rate_limit_requests": limit.get("requests"),
            "default_rate_limit_seconds": limit.get("seconds"),
        }
    if rule == "default_quota":
        quota = value if isinstance(value, dict) else {}
        return {
            "default_quota_requests": quota.get("requests"),
            "default_quota_period": quota.get("period"),
        }
    return {rule: value}


def _days(days: int) -> str:
    return "1 day" if days == 1 else f"{days} days"


def beyond_lifetime(days: int, latest: datetime) -> ApiError:
    """403 `organization_policy` for an expiry later than the policy allows, or none."""
    message = (
        f"The organization's policy (max_key_lifetime_days) lets a key live at most "
        f"{_days(days)}: it must expire no later than {latest.isoformat()}Z."
    )
    return ApiError(403, "organization_policy", message, {"expires_at": [message]})


def limit_reached(max_keys: int, held: int, rotation: bool) -> ApiError:
    """409 `key_limit_reached`: the organization holds as many keys as its policy allows."""
    noun = "key" if max_keys == 1 else "keys"
    advice = (
        "rotate with grace_seconds 0 (the old key is deleted at once), or delete a key first."
        if rotation
        else "delete a key before making another."
    )
    return ApiError(
        409,
        "key_limit_reached",
        f"The organization's policy (max_keys) allows at most {max_keys} {noun}, and it "
        f"holds {held}: {advice}",
    )


def govern(
    organization_id: int, data: dict, write: str, expires_at: datetime | None = None
) -> Governed:
    """The organization's policy applied to one write of a key (`write`: CREATE, ROTATE or
    UPDATE, with the body it loaded), inside its transaction: 403 `organization_policy`
    for an `expires_at` the body names beyond the lifetime; 409 `key_limit_reached` when
    the write adds a key (a create; a rotation that keeps the old key for a grace period)
    to an organization at `max_keys`. For a new key (a create or a successor) whose body
    names no expiry, the one it gets: `expires_at` (the one it would otherwise get)
    brought within the lifetime; and the rate limit a create that names none gets."""
    adds_key = write == CREATE or (write == ROTATE and data.get("grace_seconds", 0) > 0)
    if write == UPDATE and "expires_at" not in data:
        return Governed(expires_at, None)  # no rule to judge: nothing to read
    policy = _locked(organization_id) if adds_key else of(organization_id)
    latest = policy.latest_expiry(utcnow())
    if latest is not None:
        if "expires_at" in data:
            named = data["expires_at"]
            if named is None or named > latest:
                raise beyond_lifetime(policy.max_key_lifetime_days, latest)
        elif expires_at is None or expires_at > latest:
            expires_at = latest
    if adds_key and policy.max_keys is not None:
        held = _key_count(organization_id)
        if held >= policy.max_keys:
            raise limit_reached(policy.max_keys, held, rotation=write == ROTATE)
    return Governed(expires_at, policy.default_rate_limit, policy.default_quota)


def read(caller: Caller) -> Summary:
    """The caller's organization as GET /api/organization shows it: for its
    sdk_integration keys only (the policy bounds every key of the organization), else 403
    `forbidden`."""
    if caller.kind != SDK_INTEGRATION:
        raise ApiError(
            403, "forbidden", "Only an sdk_integration key may read its organization's policy."
        )
    return summary(caller.organization_id)
