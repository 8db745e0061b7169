"""Webhooks (docs/design.md, "Webhooks"): an organization's endpoints, the key events written
for them in the transaction of each change, one delivery per event and endpoint with its
tries, and the expiry announcements already made.

New tables only: existing keys and their reads are untouched. A delivery is claimed by one
worker's sender at a time (`claim`, `lease_until`); ix_webhook_deliveries_due serves the
senders' look for due tries, ix_webhook_deliveries_endpoint an endpoint's list of them.
key_announcements' primary key (identifier, notice, expires_at) makes each announcement of
an expiry happen once, whichever worker finds it first.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-20
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("public_id", sa.String(40), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("description", sa.String(500), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("secret", sa.String(100), nullable=False),
        sa.Column("previous_secret", sa.String(100), nullable=True),
        sa.Column("previous_secret_until", sa.DateTime(), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("failing_since", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_webhook_endpoints_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
        sa.UniqueConstraint("public_id", name=op.f("uq_webhook_endpoints_public_id")),
    )
    op.create_index(
        "ix_webhook_endpoints_organization", "webhook_endpoints", ["organization_id", "id"]
    )
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_webhook_events_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_events")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("public_id", sa.String(40), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("endpoint_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("next_attempt", sa.DateTime(), nullable=False),
        sa.Column("claim", sa.String(40), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("last_attempt", sa.DateTime(), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(200), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["webhook_events.id"],
            name=op.f("fk_webhook_deliveries_event_id_webhook_events"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoints.id"],
            name=op.f("fk_webhook_deliveries_endpoint_id_webhook_endpoints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint("public_id", name=op.f("uq_webhook_deliveries_public_id")),
    )
    op.create_index("ix_webhook_deliveries_due", "webhook_deliveries", ["status", "next_attempt"])
    op.create_index("ix_webhook_deliveries_endpoint", "webhook_deliveries", ["endpoint_id", "id"])
    op.create_table(
        "key_announcements",
        sa.Column("identifier", sa.String(64), nullable=False),
        sa.Column("notice", sa.String(20), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("announced", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint(
            "identifier", "notice", "expires_at", name=op.f("pk_key_announcements")
        ),
    )


def downgrade() -> None:
    op.drop_table("key_announcements")
    op.drop_index("ix_webhook_deliveries_endpoint", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_events")
    op.drop_index("ix_webhook_endpoints_organization", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
