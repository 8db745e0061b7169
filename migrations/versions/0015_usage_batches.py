"""Usage batches (docs/design.md, "Many hosts": usage exact across hosts): each batch of usage
counts taken from Redis and written, recorded with its counts, so that a batch found again
is written once.

A new table only: nothing stored before is touched.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_batches",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("written", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_batches")),
    )
    op.create_index(op.f("ix_usage_batches_written"), "usage_batches", ["written"])


def downgrade() -> None:
    op.drop_index(op.f("ix_usage_batches_written"), table_name="usage_batches")
    op.drop_table("usage_batches")
