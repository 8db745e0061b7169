"""The audit log names keys (issue 36): each event keeps the acting and target keys' names
and kinds as they were when it was recorded, so that after a rename or a delete the log
still says which key it was.

The columns are nullable: the operator and leak reports are no key, and events recorded
before this revision get null names (a deleted key's name cannot be derived any more, and
a renamed key's present name would be the wrong one). No key is touched.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

COLUMNS = (
    ("actor_name", 200),
    ("actor_kind", 20),
    ("target_name", 200),
    ("target_kind", 20),
)


def upgrade() -> None:
    for name, length in COLUMNS:
        op.add_column("audit_events", sa.Column(name, sa.String(length), nullable=True))


def downgrade() -> None:
    # DROP COLUMN in place (SQLite 3.35+), as 0003 does.
    for name, _ in reversed(COLUMNS):
        op.drop_column("audit_events", name)
