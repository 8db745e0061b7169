"""The blueprint at /api/audit: the organization's key events, for keys that hold every
scope."""

from __future__ import annotations

from flask import Blueprint

from app import audit
from app.access import auth
from app.audit import schemas
from app.http.operations import KEYS_REQUEST, MANAGING, Operation, documented
from app.http.request_body import query_arguments

bp = Blueprint("audit", __name__, url_prefix="/api/audit")
bp.before_request(auth.require_managing_key)


@bp.get("")
@documented(
    Operation(
        "List audit events",
        "The organization's key events, newest first, one page at a time: every create, "
        "update, rotation, delete and leak-report revocation, by whom, from where. "
        + MANAGING
        + " Only a key that holds every scope (an sdk_integration key, or a custom key with "
        "all eleven) may read it, else 403 `forbidden`.",
        200,
        "One page of events, and how many match in all.",
        (*KEYS_REQUEST, 422),
        response=schemas.EventPage,
        query=schemas.EventArguments,
    )
)
def list_events():
    arguments = schemas.event_arguments.load(query_arguments())
    return schemas.event_page.dump(audit.list_events(auth.caller(), **arguments))
