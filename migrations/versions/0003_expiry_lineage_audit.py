"""Keys that expire, the key that made each one, and the audit log of every change.

Adds nullable columns only (an existing key keeps working, never expiring, made by the
operator as far as anyone can tell), their indexes, and the audit_events table. The
previous version of the service keeps working on this schema: it neither reads nor
writes the new columns, and it records no events.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN needs no table rebuild on SQLite or PostgreSQL (and so keeps key_counts'
    # triggers on SQLite).
    op.add_column("api_keys", sa.Column("expires_at", sa.DateTime(), nullable=True))
    op.add_column("api_keys", sa.Column("created_by", sa.String(64), nullable=True))
    # The list filters: state (expires_at) and unused_since (last_used), per organization.
    op.create_index(
        "ix_api_keys_expiry", "api_keys", ["organization_id", "expires_at"], unique=False
    )
    op.create_index(
        "ix_api_keys_last_used", "api_keys", ["organization_id", "last_used"], unique=False
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("actor", sa.String(70), nullable=False),
        sa.Column("target", sa.String(70), nullable=False),
        sa.Column("client_address", sa.String(100), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_audit_events_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    # Newest first, per organization; and the events of one key.
    op.create_index("ix_audit_events_listing", "audit_events", ["organization_id", "id"])
    op.create_index("ix_audit_events_target", "audit_events", ["organization_id", "target", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_target", table_name="audit_events")
    op.drop_index("ix_audit_events_listing", table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index("ix_api_keys_last_used", table_name="api_keys")
    op.drop_index("ix_api_keys_expiry", table_name="api_keys")
    # DROP COLUMN in place (SQLite 3.35+): a rebuilt table would lose key_counts' triggers.
    op.drop_column("api_keys", "created_by")
    op.drop_column("api_keys", "expires_at")
