"""Keys brought in (docs/design.md, "Import and export"): how an imported key is shown.

A nullable column: every key stored before is shown as it was (`<identifier>...`), and
authenticates as before. ix_api_keys_shown serves a path that names an imported key by its
shown form.

Revision ID: 0013
Revises: 0012
Create Date: 2027-01-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("shown", sa.String(20), nullable=True))
    op.create_index("ix_api_keys_shown", "api_keys", ["organization_id", "shown"])


def downgrade() -> None:
    op.drop_index("ix_api_keys_shown", table_name="api_keys")
    # DROP COLUMN in place (SQLite 3.35+): a rebuilt table would lose key_counts' triggers.
    op.drop_column("api_keys", "shown")
