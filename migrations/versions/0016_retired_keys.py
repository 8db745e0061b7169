"""Retired keys: the identifier and digest of every key deleted, rotated out or revoked
from now on, kept for good, so that no identifier nor digest is given twice (an import
naming one is refused as a key the service knows).

A new table only: nothing stored before is touched. The keys deleted before this revision
left nothing to keep. Answers stored for `Idempotency-Key` before it were found by a digest
of the caller's identifier alone; they are now looked up by the caller's row, so none of
them is replayed again (a retry that spans the upgrade is a new request).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

IDENTIFIER = sa.String(64).with_variant(sa.String(64, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "retired_keys",
        sa.Column("identifier", IDENTIFIER, nullable=False),
        sa.Column("digest", sa.LargeBinary(32), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("retired_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("identifier", name=op.f("pk_retired_keys")),
        sa.UniqueConstraint("digest", name=op.f("uq_retired_keys_digest")),
    )


def downgrade() -> None:
    op.drop_table("retired_keys")
