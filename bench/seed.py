"""A fresh SQLite database with N keys across a few organizations, written in bulk
through the service's own models and key format (seconds, not 10,000 HTTP calls)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import insert, select, text, update

from app import create_app
from app.domain import keyformat
from app.domain.scopes import ALL, BITS
from app.domain.timestamps import utcnow
from app.extensions import db
from app.keys import operator
from app.storage.database import upgrade
from app.storage.models import ApiKey, Identity

BATCH = 5_000
# The metered reader's own limits: a rate limit and a quota no benchmark run can spend.
METERED = {
    "rate_limit_requests": 1_000_000,
    "rate_limit_seconds": 60,
    "quota_requests": 1_000_000_000,
    "quota_period": "month",
}
# With metadata: each organization's keys spread evenly over this many teams.
TEAMS = 100
# A team's index entries, from the metadata every seeded key then has (SQLite's JSON).
_INDEX_METADATA = text(
    "INSERT INTO key_metadata (key_id, organization_id, name, value) "
    "SELECT id, organization_id, 'team', json_extract(metadata, '$.team') FROM api_keys "
    "WHERE json_extract(metadata, '$.team') IS NOT NULL"
)


@dataclass
class Seeded:
    """The keys the benchmark authenticates with and names."""

    reader: str  # full SDK key of the organization the reads go to
    read_target: str  # identifier of one of its keys
    writer: str  # full SDK key of a separate organization, so that writes leave reads alone
    write_target: str  # identifier of a custom key there
    rotate_targets: list[str]  # identifiers of fresh custom keys there, to rotate
    keys_per_organization: int
    # Full SDK key of the reads' organization with a rate limit and a quota, neither ever
    # spent by a benchmark: what a key's own limits cost beside `reader`.
    metered: str = ""
    # Full SDK key of the same organization with those limits and an identity with them too
    # (docs/design.md, "Identities"): what a holder's limits cost beside `metered`.
    held: str = ""


def seed(
    url: str, keys: int, organizations: int = 4, metadata: bool = False, rotations: int = 0
) -> Seeded:
    """Migrate the database at `url` and fill it; `keys` are shared evenly by
    `organizations` organizations, plus one organization for the writes. With `metadata`,
    each seeded key has {"team": "team-<n>"}, n from 0 to TEAMS - 1, evenly in each
    organization, indexed for the list's metadata[team]= filter. `rotations` fresh keys of
    the writes' organization are there to be rotated, each once (then its successor)."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "RATELIMIT_ENABLED": False})
    upgrade(app)
    per_organization = keys // organizations
    with app.app_context():
        readers = [operator.create_organization(f"bench-{n}") for n in range(organizations)]
        _, writer_keys = operator.create_organization("bench-writes")
        start = utcnow() - timedelta(days=1)
        rows = []
        for number in range(per_organization * organizations):
            organization = readers[number % organizations][0]
            identifier, full_key = keyformat.new_key(app.config["KEY_PREFIX"])
            moment = start + timedelta(microseconds=number)
            rows.append(
                {
                    "organization_id": organization.id,
                    "identifier": identifier,
                    "digest": keyformat.digest(full_key),
                    "name": f"key {number}",
                    "kind": "custom",
                    "scope_bits": BITS["monitor:read"] | BITS["site:read"],
                    "created": moment,
                    "updated": moment,
                    "last_used": None,
                }
            )
            if metadata:
                team = (number // organizations) % TEAMS
                rows[-1]["metadata_"] = {"team": f"team-{team}"}
            if len(rows) == BATCH:
                db.session.execute(insert(ApiKey), rows)
                rows = []
        if rows:
            db.session.execute(insert(ApiKey), rows)
        if metadata:
            db.session.execute(_INDEX_METADATA)
        target, _ = operator.mint_key(
            "bench-writes", {"name": "renamed", "kind": "custom", "scope_bits": BITS["site:read"]}
        )
        rotated = [
            operator.mint_key(
                "bench-writes",
                {"name": f"rotated {n}", "kind": "custom", "scope_bits": BITS["site:read"]},
            )[0].identifier
            for n in range(rotations)
        ]
        sdk = {"name": "metered", "kind": "sdk_integration", "scope_bits": ALL}
        metered_key, metered = operator.mint_key("bench-0", sdk)
        db.session.execute(
            update(ApiKey).where(ApiKey.identifier == metered_key.identifier).values(**METERED)
        )
        now = utcnow()
        holder = {"external_id": "bench-holder", "name": "bench holder", "metadata": {}}
        identity = db.session.execute(
            insert(Identity).returning(Identity.id),
            [
                {
                    "organization_id": readers[0][0].id,
                    **holder,
                    **METERED,
                    "created": now,
                    "updated": now,
                }
            ],
        ).scalar_one()
        held_key, held = operator.mint_key("bench-0", sdk | {"name": "held"})
        db.session.execute(
            update(ApiKey)
            .where(ApiKey.identifier == held_key.identifier)
            .values(**METERED, identity_id=identity)
        )
        db.session.commit()
        reader = next(full for key, full in readers[0][1] if key.kind == "sdk_integration")
        writer = next(full for key, full in writer_keys if key.kind == "sdk_integration")
        seeded = Seeded(
            reader=reader,
            read_target=keyformat.shown(rows_identifier(readers[0][0].id)),
            writer=writer,
            write_target=target.identifier,
            rotate_targets=rotated,
            keys_per_organization=per_organization + 2,
            metered=metered,
            held=held,
        )
        db.engine.dispose()
    return seeded


def rows_identifier(organization_id: int) -> str:
    """The identifier of the newest seeded key of an organization."""
    return db.session.scalar(
        select(ApiKey.identifier)
        .where(ApiKey.organization_id == organization_id, ApiKey.kind == "custom")
        .order_by(ApiKey.created.desc())
        .limit(1)
    )
