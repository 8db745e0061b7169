"""An organization's own policy (docs/design.md, "Organization policy"), set by the
operator with `flask org policy`: the most keys it may hold, the longest a key may live,
and the rate limit a key made without one gets.

Each is a nullable column of organizations: NULL (every existing organization's value) is
no rule, so existing organizations and their keys work exactly as before. ADD COLUMN needs
no table rebuild on SQLite or PostgreSQL.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS = (
    "max_keys",
    "max_key_lifetime_days",
    "default_rate_limit_requests",
    "default_rate_limit_seconds",
)


def upgrade() -> None:
    for column in COLUMNS:
        op.add_column("organizations", sa.Column(column, sa.Integer(), nullable=True))
    op.add_column("organizations", sa.Column("default_quota_requests", sa.Integer(), nullable=True))
    op.add_column("organizations", sa.Column("default_quota_period", sa.String(10), nullable=True))


def downgrade() -> None:
    for column in ("default_quota_period", "default_quota_requests", *reversed(COLUMNS)):
        op.drop_column("organizations", column)
