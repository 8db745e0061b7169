"""An imported key shown by its digest, never by a part of its secret: the shown forms
0013 stored as a key's first 8 characters and `...` become its prefix (if those characters
begin with one) and 4 hexadecimal digits of its digest and `...`, or `imported:` and 8 of
them (app/domain/keyformat.py, shown_digest). `imported:` forms are kept. A key made by an
imported key names its maker as every answer does: `created_by` holds that shown form in
place of the maker's identifier, and the audit log's events name it so as their `actor`
and `target` (they named it `<identifier>...`).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# keyformat's rule, as it is at this revision (a migration does not import the application).
_PREFIX = re.compile(r"(?:[a-z]{2,8}[_-]){1,2}")


def _shown(head: str, digest: bytes) -> str:
    found = _PREFIX.match(head)
    if found is not None and found.end() <= 12:
        return found.group() + digest.hex()[:4] + "..."
    return "imported:" + digest.hex()[:8]


def upgrade() -> None:
    keys = sa.table(
        "api_keys",
        sa.column("id", sa.Integer),
        sa.column("digest", sa.LargeBinary),
        sa.column("shown", sa.String),
    )
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(keys.c.id, keys.c.digest, keys.c.shown).where(
            keys.c.shown.is_not(None), sa.not_(keys.c.shown.startswith("imported:"))
        )
    ).all()
    for key_id, digest, shown in rows:
        head = shown.removesuffix("...")
        connection.execute(
            sa.update(keys).where(keys.c.id == key_id).values(shown=_shown(head, bytes(digest)))
        )
    maker = (
        "SELECT k.shown FROM api_keys k WHERE k.shown IS NOT NULL"
        " AND k.identifier = api_keys.created_by"
    )
    connection.execute(
        sa.text(f"UPDATE api_keys SET created_by = ({maker}) WHERE EXISTS ({maker})")  # noqa: S608
    )
    # One statement a column, whatever the number of imported keys (none is indexed).
    events = sa.table(
        "audit_events",
        sa.column("organization_id", sa.Integer),
        sa.column("actor", sa.String),
        sa.column("target", sa.String),
    )
    named = sa.table(
        "api_keys",
        sa.column("organization_id", sa.Integer),
        sa.column("identifier", sa.String),
        sa.column("shown", sa.String),
    ).alias("named")
    for column in (events.c.actor, events.c.target):
        same = (
            named.c.shown.is_not(None),
            named.c.organization_id == events.c.organization_id,
            named.c.identifier + "..." == column,
        )
        shown = sa.select(named.c.shown).where(*same).scalar_subquery()
        connection.execute(
            sa.update(events).values({column.name: shown}).where(sa.exists().where(*same))
        )


def downgrade() -> None:
    """The secret's characters are gone: the digest forms stay."""
