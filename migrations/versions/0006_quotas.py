"""Quotas (docs/design.md, "Quotas"): a key's allowed uses per UTC calendar period.

`quota_requests` and `quota_period` (both null: no quota); `quota_counter`, the identifier
whose count the key spends (its own, or the first of its rotations': a successor takes
over its predecessor's count). The counts themselves live where the limits count
(app/access/counting), not in the database: no write per use.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("quota_requests", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("quota_period", sa.String(10), nullable=True))
    op.add_column("api_keys", sa.Column("quota_counter", sa.String(64), nullable=True))


def downgrade() -> None:
    # DROP COLUMN in place (SQLite 3.35+): a rebuilt table would lose key_counts' triggers.
    for column in ("quota_counter", "quota_period", "quota_requests"):
        op.drop_column("api_keys", column)
