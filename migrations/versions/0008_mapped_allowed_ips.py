"""IPv4-mapped entries of `allowed_ips` in their IPv4 form, as they are now stored:
`::ffff:10.0.0.1/128` becomes `10.0.0.1/32` and `::ffff:10.0.0.0/104` becomes `10.0.0.0/8`,
as the service now stores what it is given (app/domain/addresses.py); an entry that becomes one
the key already lists is kept once, in its place. Keys without such an entry are not
written. The rule is written here again (a migration does not import the application).

The downgrade leaves the entries in IPv4 form: the previous version reads them as the IPv4
networks they are (it matched an IPv4 client only against IPv4 entries, so the mapped
form never matched anyone there).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

import ipaddress

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_MAPPED_PREFIX = 96


def _ipv4_form(entry: str) -> str:
    network = ipaddress.ip_network(entry)
    if (
        isinstance(network, ipaddress.IPv6Network)
        and network.prefixlen >= _MAPPED_PREFIX
        and network.network_address.ipv4_mapped is not None
    ):
        address = int(network.network_address) & 0xFFFFFFFF
        return str(ipaddress.IPv4Network((address, network.prefixlen - _MAPPED_PREFIX)))
    return entry


def upgrade() -> None:
    api_keys = sa.table("api_keys", sa.column("id", sa.Integer), sa.column("allowed_ips", DOCUMENT))
    connection = op.get_bind()
    mapped = sa.cast(api_keys.c.allowed_ips, sa.Text).like("%::ffff:%")
    rows = connection.execute(sa.select(api_keys.c.id, api_keys.c.allowed_ips).where(mapped))
    for key_id, entries in rows.all():
        normal = list(dict.fromkeys(map(_ipv4_form, entries)))
        if normal != entries:
            connection.execute(
                sa.update(api_keys).where(api_keys.c.id == key_id).values(allowed_ips=normal)
            )


def downgrade() -> None:
    pass
