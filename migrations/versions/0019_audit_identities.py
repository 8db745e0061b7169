"""An identity is a boundary: each audit event keeps the identities of its acting key and
of its target (a key, or an identity for an identity's own events), so that a key of an
identity reads its identity's events alone.

Two nullable columns and their indexes. The events recorded before are given the
identities of the keys (and identities) they name that still exist; an event of a key
deleted before this revision keeps none, and only keys of no identity read it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# The identity of the key an event's `column` names as `<identifier>...`, in its
# organization; only for the keys that belong to one.
_OF_KEY = """
UPDATE audit_events SET {column}_identity_id = (
    SELECT k.identity_id FROM api_keys k
    WHERE k.identifier = substr(audit_events.{column}, 1, length(audit_events.{column}) - 3)
      AND k.organization_id = audit_events.organization_id
)
WHERE {column} IN (
    SELECT k.identifier || '...' FROM api_keys k WHERE k.identity_id IS NOT NULL
)
"""
_OF_IDENTITY = """
UPDATE audit_events SET target_identity_id = (
    SELECT i.id FROM identities i
    WHERE i.public_id = audit_events.target AND i.organization_id = audit_events.organization_id
)
WHERE action LIKE 'identity.%'
"""


def upgrade() -> None:
    for column in ("actor_identity_id", "target_identity_id"):
        op.add_column("audit_events", sa.Column(column, sa.Integer(), nullable=True))
    op.create_index(
        "ix_audit_events_actor_identity",
        "audit_events",
        ["organization_id", "actor_identity_id", "id"],
    )
    op.create_index(
        "ix_audit_events_target_identity",
        "audit_events",
        ["organization_id", "target_identity_id", "id"],
    )
    for column in ("actor", "target"):
        op.execute(_OF_KEY.format(column=column))
    op.execute(_OF_IDENTITY)


def downgrade() -> None:
    op.drop_index("ix_audit_events_target_identity", table_name="audit_events")
    op.drop_index("ix_audit_events_actor_identity", table_name="audit_events")
    for column in ("target_identity_id", "actor_identity_id"):
        op.drop_column("audit_events", column)
