"""Identities (docs/design.md, "Identities"): whoever holds keys in an organization's own terms,
with limits that bind every key it holds; and the limits that bind a key because of the
keys that made it.

`identities` is a new table; audit_events.action widens to 40 characters for its actions.
`api_keys` gains `identity_id` (null: no identity) and `bound_by`, the limits of the keys
that made it (`[]`: none, as every existing key: the operator's keys and keys made before
this revision are bound by their own limits only).
Added in place: a rebuilt api_keys would lose key_counts' triggers.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# JSONB on PostgreSQL (compared by value, as a default or in a query); JSON text elsewhere.
DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "identities",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("public_id", sa.String(40), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column(
            "external_id",
            sa.String(255).with_variant(sa.String(255, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("metadata", DOCUMENT, server_default=sa.text("'{}'"), nullable=False),
        sa.Column("rate_limit_requests", sa.Integer(), nullable=True),
        sa.Column("rate_limit_seconds", sa.Integer(), nullable=True),
        sa.Column("quota_requests", sa.Integer(), nullable=True),
        sa.Column("quota_period", sa.String(10), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_identities_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_identities")),
        sa.UniqueConstraint("public_id", name=op.f("uq_identities_public_id")),
        sa.UniqueConstraint(
            "organization_id", "external_id", name=op.f("uq_identities_organization_id_external_id")
        ),
    )
    op.create_index(
        "ix_identities_listing", "identities", ["organization_id", "created", "public_id"]
    )
    if op.get_context().dialect.name == "sqlite":
        # SQLite adds a column's reference in its ADD COLUMN only (alembic would rebuild).
        op.execute(
            "ALTER TABLE api_keys ADD COLUMN identity_id INTEGER CONSTRAINT "
            "fk_api_keys_identity_id_identities REFERENCES identities (id)"
        )
    else:
        op.add_column("api_keys", sa.Column("identity_id", sa.Integer(), nullable=True))
        op.create_foreign_key(
            op.f("fk_api_keys_identity_id_identities"),
            "api_keys",
            "identities",
            ["identity_id"],
            ["id"],
        )
    op.add_column(
        "api_keys",
        sa.Column("bound_by", DOCUMENT, server_default=sa.text("'[]'"), nullable=False),
    )
    op.create_index("ix_api_keys_identity", "api_keys", ["identity_id"])
    # Room for the identities' actions ("identity.quota_exhausted"); SQLite rebuilds the
    # table (it has no triggers), PostgreSQL alters the column.
    with op.batch_alter_table("audit_events") as batch:
        batch.alter_column(
            "action", type_=sa.String(40), existing_type=sa.String(20), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.alter_column(
            "action", type_=sa.String(20), existing_type=sa.String(40), existing_nullable=False
        )
    op.drop_index("ix_api_keys_identity", table_name="api_keys")
    # DROP COLUMN in place (SQLite 3.35+): a rebuilt table would lose key_counts' triggers.
    op.drop_column("api_keys", "bound_by")
    if op.get_context().dialect.name == "postgresql":
        op.drop_constraint("fk_api_keys_identity_id_identities", "api_keys", type_="foreignkey")
    op.drop_column("api_keys", "identity_id")
    op.drop_index("ix_identities_listing", table_name="identities")
    op.drop_table("identities")
