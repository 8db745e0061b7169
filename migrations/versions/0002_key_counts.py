"""How many keys each organization holds of each kind, kept by triggers on api_keys.

A list page tells its total: counting an organization's keys stepped through every one of
them per request (25,000 index entries for an organization of 25,000 keys); the count is
now one row per kind, which the database itself keeps right on every insert, delete or
move of a key, whatever version of the service (or an operator's SQL) writes it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_ADD = """
    INSERT INTO key_counts (organization_id, kind, total) VALUES (NEW.organization_id, NEW.kind, 1)
    ON CONFLICT (organization_id, kind) DO UPDATE SET total = key_counts.total + 1;
"""
_REMOVE = """
    UPDATE key_counts SET total = total - 1
    WHERE organization_id = OLD.organization_id AND kind = OLD.kind;
"""
# SQLite: a trigger per event. A later revision that rebuilds api_keys ("batch" mode copies
# the table) must create these again: a table's triggers go with it.
SQLITE_TRIGGERS = {
    "api_keys_counted_on_insert": f"AFTER INSERT ON api_keys BEGIN {_ADD} END",
    "api_keys_counted_on_delete": f"AFTER DELETE ON api_keys BEGIN {_REMOVE} END",
    "api_keys_counted_on_move": (
        f"AFTER UPDATE OF organization_id, kind ON api_keys BEGIN {_REMOVE} {_ADD} END"
    ),
}
POSTGRESQL_FUNCTION = f"""
CREATE FUNCTION api_keys_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM key_counts;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN {_REMOVE} END IF;
    IF TG_OP <> 'DELETE' THEN {_ADD} END IF;
    RETURN NULL;
END
$$
"""  # noqa: S608 - this module's own constant SQL
POSTGRESQL_TRIGGERS = {
    "api_keys_counted": "AFTER INSERT OR DELETE OR UPDATE OF organization_id, kind ON api_keys"
    " FOR EACH ROW EXECUTE FUNCTION api_keys_count()",
    "api_keys_counted_on_truncate": "AFTER TRUNCATE ON api_keys"
    " FOR EACH STATEMENT EXECUTE FUNCTION api_keys_count()",
}


def upgrade():
    on_postgresql = op.get_bind().dialect.name == "postgresql"
    if on_postgresql:  # no key written between the count below and the trigger
        op.execute("LOCK TABLE api_keys IN SHARE ROW EXCLUSIVE MODE")
    op.create_table(
        "key_counts",
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_key_counts_organization_id_organizations"),
            ondelete="CASCADE",  # an organization whose keys are gone goes with its counts
        ),
        sa.PrimaryKeyConstraint("organization_id", "kind", name=op.f("pk_key_counts")),
    )
    op.execute(
        "INSERT INTO key_counts (organization_id, kind, total)"
        " SELECT organization_id, kind, count(*) FROM api_keys GROUP BY organization_id, kind"
    )
    if on_postgresql:
        op.execute(POSTGRESQL_FUNCTION)
    triggers = POSTGRESQL_TRIGGERS if on_postgresql else SQLITE_TRIGGERS
    for name, definition in triggers.items():
        op.execute(f"CREATE TRIGGER {name} {definition}")


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        for name in POSTGRESQL_TRIGGERS:
            op.execute(f"DROP TRIGGER {name} ON api_keys")
        op.execute("DROP FUNCTION api_keys_count()")
    else:
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("key_counts")
