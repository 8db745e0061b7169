"""The blueprint at /api/revoke: whoever holds a leaked key may end it, with no other
authentication (as GitHub's credential revocation API works). The answer is the same
whatever the keys were, and each report counts as a failed authentication of its address,
so that the endpoint tells nothing and guesses cost what they cost elsewhere."""

from __future__ import annotations

from flask import Blueprint

from app.access import limits
from app.http.operations import ANY_REQUEST, WITH_BODY, Operation, documented
from app.http.request_body import json_object
from app.leaks import service
from app.leaks.schemas import LeakReport, leak_report

bp = Blueprint("leaks", __name__, url_prefix="/api/revoke")


@bp.post("")
@documented(
    Operation(
        "Report leaked API keys",
        "For a secret scanner or a person who found keys where they should not be: no "
        "authentication, since holding a key is the right to end it. Every listed key that "
        "exists, of any organization, is deleted at once and recorded in its "
        "organization's audit log (`key.revoked`, actor `leak-report`). The answer is 202 "
        '`{"received": N}` whatever the keys were: it tells nothing about them. Each '
        "report counts toward the failed-authentication limit of its address.",
        202,
        "The report, received; N is the number of keys listed.",
        (*ANY_REQUEST, 429, *WITH_BODY),
        response={
            "type": "object",
            "properties": {"received": {"type": "integer", "minimum": 1, "maximum": 100}},
            "required": ["received"],
        },
        body=LeakReport,
        secured=False,
    )
)
def revoke():
    limits.attempt()
    keys = leak_report.load(json_object())["keys"]
    service.revoke_leaked(keys)
    return {"received": len(keys)}, 202
