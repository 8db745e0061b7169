"""Keys that carry policy (docs/design.md, "Key policy"): enabled, allowed_ips, rate_limit,
metadata, and the successor of a rotated key.

Every new column of api_keys has a default that every existing key takes (enabled, usable
from anywhere, no limit of its own, no metadata) or is nullable (`replaced_by`): existing
keys keep working as before, and ADD COLUMN needs no table rebuild on SQLite or PostgreSQL
(and so keeps key_counts' triggers on SQLite).

`allowed_ips` and `metadata` are stored as JSON on the key, read with it in one row.
`GET /api/keys?metadata[name]=value` is served by a side table, key_metadata: one row per
member, indexed on (organization_id, name, value, key_id), which works the same on both
databases (a GIN index on JSONB would serve PostgreSQL only; SQLite can index a JSON member
only for a name fixed in advance). The service, the only writer of keys, writes both in the
key's transaction; a key's rows go with it (ON DELETE CASCADE). Existing keys have no
metadata, hence no rows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-08
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# JSONB on PostgreSQL (compared by value, as a default or in a query); JSON text elsewhere.
DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "api_keys", sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False)
    )
    op.add_column(
        "api_keys",
        sa.Column("allowed_ips", DOCUMENT, server_default=sa.text("'[]'"), nullable=False),
    )
    op.add_column("api_keys", sa.Column("rate_limit_requests", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("rate_limit_seconds", sa.Integer(), nullable=True))
    op.add_column(
        "api_keys",
        sa.Column("metadata", DOCUMENT, server_default=sa.text("'{}'"), nullable=False),
    )
    op.add_column("api_keys", sa.Column("replaced_by", sa.String(64), nullable=True))
    op.create_table(
        "key_metadata",
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(40), nullable=False),
        sa.Column("value", sa.String(500), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.id"],
            name=op.f("fk_key_metadata_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("key_id", "name", name=op.f("pk_key_metadata")),
    )
    op.create_index(
        "ix_key_metadata_lookup", "key_metadata", ["organization_id", "name", "value", "key_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_key_metadata_lookup", table_name="key_metadata")
    op.drop_table("key_metadata")
    # DROP COLUMN in place (SQLite 3.35+): a rebuilt table would lose key_counts' triggers.
    for column in (
        "replaced_by",
        "metadata",
        "rate_limit_seconds",
        "rate_limit_requests",
        "allowed_ips",
        "enabled",
    ):
        op.drop_column("api_keys", column)
