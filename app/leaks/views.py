"""The blueprint at /api/revoke: whoever holds a leaked key may end it, with no other
authentication (as GitHub's credential revocation API works). The answer is the same
whatever the keys were, and each report counts as a failed authentication of its address,
so that the endpoint tells nothing and guesses cost what they cost elsewhere."""

from __future__ import annotations

from flask import Blueprint

from app import auth, limits
from app.keys import service
from app.leaks.schemas import leak_report
from app.request_body import json_object

bp = Blueprint("leaks", __name__, url_prefix="/api/revoke")
bp.after_request(auth.no_store)


@bp.post("")
def revoke():
    limits.check_address()
    limits.count_failure()
    keys = leak_report.load(json_object())["keys"]
    service.revoke_leaked(keys)
    return {"received": len(keys)}, 202
