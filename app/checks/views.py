"""The blueprint at /api/forward-auth and /api/introspect: a key checked for another
service. Both authenticate as every endpoint does, count under RATELIMIT_INTROSPECT, and
record the checked key's use."""

from __future__ import annotations

from flask import Blueprint, request

from app import auth, keyformat, limits, queries
from app.checks import schemas
from app.keys import service
from app.request_body import form_or_json_object
from app.scopes import to_bits, to_names
from app.timestamps import unix_seconds

bp = Blueprint("checks", __name__, url_prefix="/api")

# A gateway forwards whatever method its client used.
ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
INACTIVE = {"active": False}
# RFC 7662's token_type for the keys of this service.
KEY_TYPE = "api_key"


@bp.route("/forward-auth", methods=ANY_METHOD)
def forward_auth():
    """204 when the request's own key holds every scope the query names, with what the
    gateway passes upstream; 401, 403 naming the missing scopes, 422 for an unknown one."""
    caller = auth.authenticate(rate=limits.INTROSPECT)
    arguments = {name: request.args.getlist(name) for name in request.args}
    required = to_bits(schemas.forward_auth_arguments.load(arguments)["scope"])
    auth.require_held(required, caller.scope_bits)
    return (
        "",
        204,
        {
            "X-Api-Key-Id": caller.identifier,
            "X-Api-Key-Kind": caller.kind,
            "X-Api-Key-Scopes": " ".join(to_names(caller.scope_bits)),
            "X-Api-Key-Organization": queries.organization_name(caller.organization_id),
        },
    )


@bp.post("/introspect")
def introspect():
    """RFC 7662: the facts of the caller's organization's key named by `token` when it
    authenticates now; `{"active": false}` and nothing else for anything else."""
    asker = auth.managing_caller(rate=limits.INTROSPECT)
    token = schemas.introspection.load(form_or_json_object())["token"]
    checked, _ = auth.found(token) if keyformat.is_full_key(token) else (None, False)
    if checked is None or checked.organization_id != asker.organization_id:
        return INACTIVE
    key = service.find_key(asker, checked.identifier)
    answer = {
        "active": True,
        "scope": " ".join(to_names(key.scope_bits)),
        "client_id": key.identifier,
        "token_type": KEY_TYPE,
        "iat": unix_seconds(key.created),
    }
    if key.expires_at is not None:
        answer["exp"] = unix_seconds(key.expires_at)
    return answer | {"kind": key.kind, "name": key.name}
