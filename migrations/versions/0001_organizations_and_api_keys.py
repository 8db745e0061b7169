"""Organizations and their API keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Identifiers sort in byte order: PostgreSQL needs the "C" collation for that.
IDENTIFIER = sa.String(length=64).with_variant(sa.String(length=64, collation="C"), "postgresql")


def upgrade():
    op.create_table(
        "organizations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("name", name=op.f("uq_organizations_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("identifier", IDENTIFIER, nullable=False),
        sa.Column("digest", sa.LargeBinary(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("scope_bits", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("last_used", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('telemetry', 'sdk_integration', 'custom')", name=op.f("ck_api_keys_kind")
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_api_keys_organization_id_organizations"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("digest", name=op.f("uq_api_keys_digest")),
        sa.UniqueConstraint("identifier", name=op.f("uq_api_keys_identifier")),
    )
    op.create_index("ix_api_keys_listing", "api_keys", ["organization_id", "created", "identifier"])
    op.create_index(
        "ix_api_keys_listing_by_kind",
        "api_keys",
        ["organization_id", "kind", "created", "identifier"],
    )


def downgrade():
    op.drop_index("ix_api_keys_listing_by_kind", table_name="api_keys")
    op.drop_index("ix_api_keys_listing", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("organizations")
