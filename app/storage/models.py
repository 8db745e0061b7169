"""The tables: organizations, identities, their API keys (and the index of their metadata),
how many keys of each kind they hold, the audit log, usage, stored answers, retired keys and
hosts. Columns, indexes and constraints only; the webhooks' tables are
app/storage/webhook_models.py's."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    UniqueConstraint,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from app.domain.scopes import KINDS
from app.extensions import db

# Identifiers sort in byte order (the list's tie-break: docs/design.md, "Listing"). SQLite compares
# bytes by default; PostgreSQL needs the "C" collation, which other databases do not know.
IDENTIFIER = String(64).with_variant(String(64, collation="C"), "postgresql")
EXTERNAL_ID = String(255).with_variant(String(255, collation="C"), "postgresql")


class Document(TypeDecorator):
    """A key's lists and objects: JSONB on PostgreSQL (compared by value), JSON text
    elsewhere. PostgreSQL's dialect is imported only on PostgreSQL: a worker on SQLite never
    loads it (2.4 MiB)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


DOCUMENT = Document()
IDENTITY_PREFIX = "id_"
_KIND_LIST = ", ".join(f"'{kind}'" for kind in KINDS)


class Organization(db.Model):
    __tablename__ = "organizations"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created: Mapped[datetime]
    # Its policy (docs/design.md, "Organization policy"; app/organizations), set by the operator;
    # None: no rule. The most keys it may hold; the most days a key may live.
    max_keys: Mapped[int | None]
    max_key_lifetime_days: Mapped[int | None]
    # The rate limit of a key made without naming one; both None: none.
    default_rate_limit_requests: Mapped[int | None]
    default_rate_limit_seconds: Mapped[int | None]
    # The quota of a key made without naming one; both None: none.
    default_quota_requests: Mapped[int | None]
    default_quota_period: Mapped[str | None] = mapped_column(String(10))


def new_identity_id() -> str:
    """An identity's id: `id_` and 16 random characters."""
    return IDENTITY_PREFIX + secrets.token_urlsafe(12)


class Identity(db.Model):
    """Whoever holds keys, in an organization's own terms (docs/design.md, "Identities"): its
    limits bind every key it holds, as one count (app/identities)."""

    __tablename__ = "identities"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The identity's id in the API: `id_` and random characters, never reused.
    public_id: Mapped[str] = mapped_column(String(40), unique=True, default=new_identity_id)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    # The organization's own id for the holder: unique in the organization.
    external_id: Mapped[str] = mapped_column(EXTERNAL_ID)
    name: Mapped[str] = mapped_column(String(200))
    metadata_: Mapped[dict[str, str]] = mapped_column(
        "metadata", DOCUMENT, server_default=text("'{}'")
    )
    # Uses per window, and allowed uses per UTC calendar period, of all its keys together;
    # both None: none.
    rate_limit_requests: Mapped[int | None]
    rate_limit_seconds: Mapped[int | None]
    quota_requests: Mapped[int | None]
    quota_period: Mapped[str | None] = mapped_column(String(10))
    created: Mapped[datetime]
    updated: Mapped[datetime]

    __table_args__ = (
        UniqueConstraint("organization_id", "external_id"),
        # Listing: one organization's identities, oldest first, ties by id.
        Index("ix_identities_listing", "organization_id", "created", "public_id"),
    )


class ApiKey(db.Model):
    """An API key. Times are naive UTC; only the SHA-256 digest of the full key is kept."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"))
    identifier: Mapped[str] = mapped_column(IDENTIFIER, unique=True)
    digest: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    scope_bits: Mapped[int]
    created: Mapped[datetime]
    updated: Mapped[datetime]
    last_used: Mapped[datetime | None]
    # From this time on the key authenticates nothing; None: it never expires.
    expires_at: Mapped[datetime | None]
    # The identifier of the key whose request made this one (an imported key's shown form,
    # as every answer names it); None: the operator.
    created_by: Mapped[str | None] = mapped_column(String(64))
    # Policy (docs/design.md, "Key policy"). A disabled key authenticates nothing.
    enabled: Mapped[bool] = mapped_column(server_default=true())
    # Networks ("10.0.0.0/8", normalised) the key may be used from; []: anywhere.
    allowed_ips: Mapped[list[str]] = mapped_column(DOCUMENT, server_default=text("'[]'"))
    # Uses per window of the key's own limit; both None: none of its own.
    rate_limit_requests: Mapped[int | None]
    rate_limit_seconds: Mapped[int | None]
    # The owner's own name -> value pairs; KeyMetadata indexes them for the list filter.
    # (`metadata` is the declarative base's own attribute, hence the attribute's name.)
    metadata_: Mapped[dict[str, str]] = mapped_column(
        "metadata", DOCUMENT, server_default=text("'{}'")
    )
    # The identifier of the key that replaced this one by rotation; None: not rotated.
    replaced_by: Mapped[str | None] = mapped_column(String(64))
    # Allowed uses per UTC calendar period (app/quotas); both None: no quota. The count is
    # kept under `quota_counter`: the identifier of the first key of its rotations.
    quota_requests: Mapped[int | None]
    quota_period: Mapped[str | None] = mapped_column(String(10))
    quota_counter: Mapped[str | None] = mapped_column(String(64))
    # The identity that holds the key (docs/design.md, "Identities"); None: none.
    identity_id: Mapped[int | None] = mapped_column(ForeignKey("identities.id"))
    # The limits of the keys that made it, at any depth, which it spends beside its own
    # (app/domain/bindings.py): [counter, rate requests, rate seconds, quota requests,
    # quota period] each; []: made by the operator or by keys without limits.
    bound_by: Mapped[list[list[Any]]] = mapped_column(DOCUMENT, server_default=text("'[]'"))
    # How an imported key is shown (app/keys/imports.py): its first 8 characters and
    # `...`, or `imported:` and 8 hexadecimal digits of its digest; None: `<identifier>...`.
    shown: Mapped[str | None] = mapped_column(String(20))

    __table_args__ = (
        # Listing: one organization's keys, oldest first, ties by identifier.
        Index("ix_api_keys_listing", "organization_id", "created", "identifier"),
        Index("ix_api_keys_listing_by_kind", "organization_id", "kind", "created", "identifier"),
        # The list filters state= and unused_since=.
        Index("ix_api_keys_expiry", "organization_id", "expires_at"),
        Index("ix_api_keys_last_used", "organization_id", "last_used"),
        # An identity's keys: its key_count, ?identity=, and the 409 of its delete.
        Index("ix_api_keys_identity", "identity_id"),
        # An imported key named by its shown form.
        Index("ix_api_keys_shown", "organization_id", "shown"),
        CheckConstraint(f"kind IN ({_KIND_LIST})", name="kind"),
    )


class KeyMetadata(db.Model):
    """One member of a key's metadata, so that `metadata[name]=value` is an index lookup on
    both databases (migrations/versions/0004_key_policy.py says why a side table)."""

    __tablename__ = "key_metadata"

    key_id: Mapped[int] = mapped_column(
        ForeignKey("api_keys.id", ondelete="CASCADE"), primary_key=True
    )
    organization_id: Mapped[int]
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    value: Mapped[str] = mapped_column(String(500))

    __table_args__ = (
        Index("ix_key_metadata_lookup", "organization_id", "name", "value", "key_id"),
    )


class KeyCount(db.Model):
    """How many keys an organization holds of a kind. The database keeps it, with triggers
    on api_keys (migrations/versions/0002_key_counts.py); the service only reads it."""

    __tablename__ = "key_counts"

    organization_id: Mapped[int] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(20), primary_key=True)
    total: Mapped[int]


class AuditEvent(db.Model):
    """One change to a key, written in the transaction of the change (app/audit)."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    at: Mapped[datetime]
    action: Mapped[str] = mapped_column(String(40))
    # The shown value of the acting key, "operator" or "leak-report".
    actor: Mapped[str] = mapped_column(String(70))
    # The shown value of the key acted on.
    target: Mapped[str] = mapped_column(String(70))
    # The acting and target keys' names and kinds when the event was recorded, so that the
    # log says which key it was after a rename or a delete. None: not a key (the operator,
    # a leak report), or an event recorded before they were kept (migration 0006).
    actor_name: Mapped[str | None] = mapped_column(String(200))
    actor_kind: Mapped[str | None] = mapped_column(String(20))
    target_name: Mapped[str | None] = mapped_column(String(200))
    target_kind: Mapped[str | None] = mapped_column(String(20))
    client_address: Mapped[str | None] = mapped_column(String(100))
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The identities (their rows' ids) of the acting key and of the target (a key, or an
    # identity for its own events) when the event was recorded, so that a key of an
    # identity reads its identity's events alone (app/domain/reach.py). None: none.
    actor_identity_id: Mapped[int | None]
    target_identity_id: Mapped[int | None]

    __table_args__ = (
        # Newest first, per organization; and the events of one key.
        Index("ix_audit_events_listing", "organization_id", "id"),
        Index("ix_audit_events_target", "organization_id", "target", "id"),
        # An identity's events, newest first.
        Index("ix_audit_events_actor_identity", "organization_id", "actor_identity_id", "id"),
        Index("ix_audit_events_target_identity", "organization_id", "target_identity_id", "id"),
    )


class KeyUsage(db.Model):
    """How many times a key was checked in one UTC hour, with one outcome (`allowed` or the
    refusal's code) and, for the uses a door let through after checking named scopes, one
    of those scopes (`scope` empty: the use itself). Written in batches by app/usage/counter.py; a
    key's counts go with it (ON DELETE CASCADE)."""

    __tablename__ = "key_usage"

    key_id: Mapped[int] = mapped_column(
        ForeignKey("api_keys.id", ondelete="CASCADE"), primary_key=True
    )
    hour: Mapped[datetime] = mapped_column(primary_key=True)
    outcome: Mapped[str] = mapped_column(String(40), primary_key=True)
    scope: Mapped[str] = mapped_column(String(40), primary_key=True)
    count: Mapped[int]

    __table_args__ = (
        # Its primary key (key_id, hour, ...) serves a key's window; this serves pruning.
        Index("ix_key_usage_hour", "hour"),
    )


class UsageBatch(db.Model):
    """A batch of usage counts taken from Redis and written into key_usage (app/usage/shared.py),
    recorded in the transaction that writes it: a batch found again (its writer killed before
    it removed it from Redis, or two workers at once) is written once. Removed with the
    usage's old hours."""

    __tablename__ = "usage_batches"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    written: Mapped[datetime] = mapped_column(index=True)


class QuotaGrant(db.Model):
    """What the grants of a quota (POST /api/keys/<key>/quota) and the changes of its period
    changed of its count in one window, in total (negative: uses given): a count rebuilt
    from the usage after Redis lost its counts (app/access/rebuild.py) keeps them. A
    counter's rows of its earlier windows are removed by its next grant."""

    __tablename__ = "quota_grants"

    # The counter (a key's lineage, `identity:` and an identity's id) and its window's name.
    counter: Mapped[str] = mapped_column(String(80), primary_key=True)
    window_name: Mapped[str] = mapped_column(String(20), primary_key=True)
    amount: Mapped[int]


class IdempotentAnswer(db.Model):
    """What a write retried with the same `Idempotency-Key` answers (app/idempotency.py): the
    first request's claim, then its answer, for 24 hours. Found by `lookup`, a digest
    derived from the caller and the Idempotency-Key (never the key itself); the answer
    sealed under a key derived from the Idempotency-Key alone (AES-GCM), so that what the
    table holds opens for no one who does not send that key again. The primary key is what
    makes one of concurrent requests the first."""

    __tablename__ = "idempotent_answers"

    lookup: Mapped[bytes] = mapped_column(LargeBinary(32), primary_key=True)
    # An HMAC of the request (method, path, body) under a key derived like the lookup's:
    # another request with the same Idempotency-Key is told apart from a retry.
    fingerprint: Mapped[bytes] = mapped_column(LargeBinary(32))
    created: Mapped[datetime]
    # The sealed answer (nonce, then AES-GCM's ciphertext and tag); None: the first request
    # is still running.
    answer: Mapped[bytes | None] = mapped_column(LargeBinary)

    __table_args__ = (
        # The removal of answers older than 24 hours.
        Index("ix_idempotent_answers_created", "created"),
    )


class RetiredKey(db.Model):
    """A key that is no more (deleted, rotated out, revoked by a leak report, deleted by
    the operator): its identifier and digest, kept for good, so that no key is ever given
    either again (app/keys/retired.py). A stored idempotent answer is bound to its caller's
    row; an identifier given twice would still be a second name for one key in the audit
    log and the lineage, and a digest given twice a dead key brought back to life."""

    __tablename__ = "retired_keys"

    identifier: Mapped[str] = mapped_column(IDENTIFIER, primary_key=True)
    digest: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    # The organization that held it; a plain number: the record outlives any row.
    organization_id: Mapped[int]
    retired_at: Mapped[datetime]


class Host(db.Model):
    """A host serving the database (app/serving/hosts.py): its id (its name and a digest of
    where it counts), the scheme of its limits' storage (host, redis, memory) and when one of
    its workers last said it serves."""

    __tablename__ = "hosts"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    storage: Mapped[str] = mapped_column(String(20))
    last_seen: Mapped[datetime]
