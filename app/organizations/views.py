"""The blueprint at /api/organization: the caller's organization and its policy."""

from __future__ import annotations

from flask import Blueprint

from app.access import auth
from app.domain.scopes import SDK_INTEGRATION
from app.http.operations import KEYS_REQUEST, MANAGING, Operation, documented
from app.organizations import policy, schemas

bp = Blueprint("organization", __name__, url_prefix="/api/organization")
bp.before_request(auth.require_managing_key)


@bp.get("")
@documented(
    Operation(
        "Get the organization",
        "The caller's organization: its name, when it was made, how many keys it holds "
        "(every state, expired and rotated keys included, until deleted) and the policy "
        "the operator set for its keys (`flask org policy`): `max_keys`, "
        "`max_key_lifetime_days`, `default_rate_limit`, each null when not set. "
        + MANAGING
        + " Only an sdk_integration key may read it, else 403 `forbidden`.",
        200,
        "The organization and its policy.",
        KEYS_REQUEST,
        response=schemas.OrganizationOutput,
        roles=(SDK_INTEGRATION,),
    )
)
def get_organization():
    return schemas.dump(policy.read(auth.caller()))
