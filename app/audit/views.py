"""The blueprint at /api/audit: the organization's key events, for keys that hold every
scope."""

from __future__ import annotations

from flask import Blueprint

from app import audit, auth
from app.audit import schemas
from app.request_body import query_arguments

bp = Blueprint("audit", __name__, url_prefix="/api/audit")
bp.before_request(auth.require_managing_key)


@bp.get("")
def list_events():
    arguments = schemas.event_arguments.load(query_arguments())
    return schemas.event_page.dump(audit.list_events(auth.caller(), **arguments))
