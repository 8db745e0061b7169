"""Reported leaked keys (docs/design.md, "Leaked keys"): each key of a report that exists is
deleted, whoever holds it, and recorded as revoked by a leak report."""

from __future__ import annotations

from flask import current_app
from sqlalchemy import delete

from app import audit
from app.domain import keyformat
from app.extensions import db
from app.keys.bodies import dump_key
from app.keys.writes import KEYS, retire
from app.storage import queries


def revoke_leaked(keys: list[str]) -> None:
    """Delete every key of `keys` that exists, whoever holds it, as reported leaked (holding
    a key is the right to end it); each one recorded as revoked by a leak report. Nothing
    says which existed."""
    prefix = current_app.config["KEY_PREFIX"]
    for full_key in dict.fromkeys(keys):  # each key once, made here or imported
        if not keyformat.is_presentable(full_key, prefix):
            continue
        digest = keyformat.digest(full_key)
        statement = (
            delete(KEYS)
            .where(KEYS.c.digest == digest)
            .returning(KEYS.c.organization_id, *queries.KEY_COLUMNS)
        )
        for organization_id, *row in db.session.execute(statement).all():
            key = queries.key_of_row(row)
            retire([(key.identifier, digest, organization_id)])
            audit.record(
                "key.revoked",
                organization_id=organization_id,
                actor=audit.LEAK_REPORT,
                target=key.identifier,
                target_key=key,
                key=dump_key(key),
            )
    db.session.commit()
