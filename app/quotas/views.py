"""The blueprint of a key's quota grants: POST /api/keys/<key>/quota (CONTRACT.md section 21)."""

from __future__ import annotations

from flask import Blueprint

from app import auth
from app.keys import schemas as key_schemas
from app.keys import service as keys
from app.operations import KEYS_REQUEST, MANAGING, WITH_BODY, Operation, documented
from app.quotas import schemas, service
from app.request_body import json_object

bp = Blueprint("quotas", __name__, url_prefix="/api/keys")
bp.before_request(auth.require_managing_key)


@bp.post("/<reference>/quota")
@documented(
    Operation(
        "Grant an API key's quota",
        "More uses in the key's current quota period (`add`), or exactly so many left "
        "(`set_remaining`); the answer's `quota_remaining` says what is left. Recorded in "
        "the audit log as `key.quota`. A key without a quota: 409 `no_quota`. "
        + MANAGING
        + " The caller must hold every scope of the key (else 403 `forbidden`).",
        200,
        "The key, with what is left of its quota.",
        (*KEYS_REQUEST, 404, *WITH_BODY, 409),
        response=key_schemas.KeyOutput,
        body=schemas.Grant,
    )
)
def grant_quota(reference: str):
    caller = auth.caller()
    key = keys.find_key(caller, reference)
    data = schemas.grant.load(json_object())
    keys.require_power_over(caller, key)
    return key_schemas.dump_key(service.grant(caller, key, data))
