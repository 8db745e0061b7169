"""Idempotent writes (docs/design.md, "Idempotent writes"): the answers of writes sent with an
`Idempotency-Key`, kept 24 hours, sealed.

A new table only: existing keys and their reads are untouched. Its primary key (`lookup`, a
digest of the caller and the Idempotency-Key) makes one of concurrent requests with the
same key the first; ix_idempotent_answers_created serves the removal of old answers.

Revision ID: 0012
Revises: 0011
Create Date: 2027-01-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotent_answers",
        sa.Column("lookup", sa.LargeBinary(32), nullable=False),
        sa.Column("fingerprint", sa.LargeBinary(32), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("answer", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("lookup", name=op.f("pk_idempotent_answers")),
    )
    op.create_index("ix_idempotent_answers_created", "idempotent_answers", ["created"])


def downgrade() -> None:
    op.drop_index("ix_idempotent_answers_created", table_name="idempotent_answers")
    op.drop_table("idempotent_answers")
