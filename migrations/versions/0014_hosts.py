"""Hosts (docs/design.md, "Many hosts"): each host that serves the database, where it counts its
limits and when it was last seen, so that a host counting in its own file (`host://`) while
another serves the same database is refused at start or reported.

A new table only: nothing stored before is touched.

Revision ID: 0014
Revises: 0013
Create Date: 2027-01-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hosts",
        sa.Column("id", sa.String(100), nullable=False),
        sa.Column("storage", sa.String(20), nullable=False),
        sa.Column("last_seen", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosts")),
    )


def downgrade() -> None:
    op.drop_table("hosts")
