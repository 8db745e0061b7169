"""Quota grants: what the grants of a quota changed of its count in each window, so that a
count rebuilt from the usage after Redis lost its counts keeps them.

A new table only: nothing stored before is touched. Grants made before it are not in it:
a count rebuilt after an upgrade has none of them (Redis's own counts are kept while they
are there).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quota_grants",
        sa.Column("counter", sa.String(80), nullable=False),
        sa.Column("window_name", sa.String(20), nullable=False),
        sa.Column("amount", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("counter", "window_name", name=op.f("pk_quota_grants")),
    )


def downgrade() -> None:
    op.drop_table("quota_grants")
