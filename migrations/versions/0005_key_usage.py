"""Per-key usage (docs/design.md, "Usage"): key_usage, one row per key, UTC hour, outcome
(`allowed` or the refusal's code) and checked scope ('' for the use itself) with its count.

Each worker counts in memory and writes its counts in batches (app/usage): an upsert adds a
batch's count to the row's. The primary key leads with (key_id, hour), the usage query's
lookup (one key, a window of hours); ix_key_usage_hour serves the pruning of hours older
than USAGE_RETENTION_DAYS. A key's rows go with it (ON DELETE CASCADE).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-15
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "key_usage",
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(), nullable=False),
        sa.Column("outcome", sa.String(40), nullable=False),
        sa.Column("scope", sa.String(40), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.id"],
            name=op.f("fk_key_usage_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("key_id", "hour", "outcome", "scope", name=op.f("pk_key_usage")),
    )
    op.create_index("ix_key_usage_hour", "key_usage", ["hour"])


def downgrade() -> None:
    op.drop_index("ix_key_usage_hour", table_name="key_usage")
    op.drop_table("key_usage")
