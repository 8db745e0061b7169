"""The blueprint at /api/identities: an organization's identities, for its sdk_integration
keys; thin views (load, call the service, dump), each with its operation in the OpenAPI
document."""

from __future__ import annotations

from flask import Blueprint, g, request, url_for

from app import idempotency
from app.access import auth
from app.domain.scopes import SDK_INTEGRATION
from app.http.operations import ANY_REQUEST, MANAGING_ROLES, WITH_BODY, Operation, documented
from app.http.request_body import json_object, query_arguments
from app.identities import schemas, service
from app.quotas import schemas as quota_schemas
from app.usage import schemas as usage_schemas
from app.usage import service as usage

bp = Blueprint("identities", __name__, url_prefix="/api/identities")


@bp.before_request
def require_manager() -> None:
    g.caller = auth.managing_caller()
    service.require_manager(g.caller, reads=request.method in READS)


READS = frozenset({"GET", "HEAD"})
NAMED = (
    "A path names an identity by its `id` or as `external_id:<external_id>`, whose `/`s "
    "are the external id's own (`external_id:team/backend`)."
)
MANAGER = (
    "Needs an `sdk_integration` key of the organization that belongs to no identity (any "
    "other key gets 403 `forbidden`). " + NAMED
)
READER = (
    "Needs an `sdk_integration` key of the organization, or a key of a managing kind that "
    "belongs to an identity, which reads its own identity alone (any other: 404); any other "
    "key gets 403 `forbidden`. " + NAMED
)
USAGE = "/usage"
REQUEST = (*ANY_REQUEST, 401, 403, 429)
ROLES = (SDK_INTEGRATION,)
LOCATION = {
    "Location": {
        "description": "The path of the new identity: `/api/identities/<id>`.",
        "required": True,
        "schema": {"type": "string"},
    }
}
LIMITS = (
    "Its `rate_limit` and `quota` bind every key it holds as one count: each use of one of "
    "them spends the key's own limits and the identity's, all or nothing."
)


@bp.get("")
@documented(
    Operation(
        "List identities",
        "The organization's identities, oldest first, one page at a time; `external_id=` "
        "finds one by the organization's own id. A key of an identity lists its own alone. "
        + READER,
        200,
        "One page of identities, and how many there are in all.",
        (*REQUEST, 422),
        response=schemas.IdentityPage,
        query=schemas.ListArguments,
        roles=MANAGING_ROLES,
    )
)
def list_identities():
    arguments = schemas.list_arguments.load(query_arguments())
    return schemas.identity_page.dump(service.list_identities(auth.caller(), **arguments))


@bp.post("")
@documented(
    Operation(
        "Create an identity",
        "A new identity: whoever holds keys, in the organization's own terms (its "
        "`external_id`, unique in the organization, else 409 `identity_exists`). "
        + LIMITS
        + " "
        + MANAGER,
        201,
        "The new identity.",
        (*REQUEST, *WITH_BODY, 409),
        response=schemas.Identity,
        body=schemas.CreateIdentity,
        headers=LOCATION,
        roles=ROLES,
    )
)
def create_identity():
    data = schemas.create_identity.load(json_object())
    identity = service.create_identity(auth.caller(), data)
    location = url_for("identities.get_identity", reference=identity["id"])
    return identity, 201, {"Location": location}


@bp.get("/<path:reference>")
@documented(
    Operation(
        "Get an identity",
        "One identity of the organization, with what is left of its quota and how many keys "
        "it holds. " + READER,
        200,
        "The identity.",
        (*REQUEST, 404),
        response=schemas.Identity,
        roles=MANAGING_ROLES,
    )
)
def get_identity(reference: str):
    return _identity_or_usage(reference)


@bp.put("/<path:reference>")
@documented(
    Operation(
        "Update an identity",
        "Change an identity (a partial update): `external_id`, `name`, `metadata`, "
        "`rate_limit`, `quota`. A change of its limits binds its keys at once; a quota whose "
        "period changes keeps what was used. " + MANAGER,
        200,
        "The updated identity.",
        (*REQUEST, 404, *WITH_BODY, 409),
        response=schemas.Identity,
        body=schemas.UpdateIdentity,
        roles=ROLES,
    )
)
def update_identity(reference: str):
    data = schemas.update_identity.load(json_object())
    return service.update_identity(auth.caller(), reference, data)


@bp.delete("/<path:reference>")
@documented(
    Operation(
        "Delete an identity",
        "An identity that holds no key; 409 `identity_in_use`, naming how many, while it "
        "holds some. " + MANAGER,
        204,
        "Deleted.",
        (*REQUEST, 404, 409),
        roles=ROLES,
    )
)
def delete_identity(reference: str):
    service.delete_identity(auth.caller(), reference)
    return "", 204


@bp.post("/<path:reference>/quota")
@documented(
    Operation(
        "Grant an identity's quota",
        "More uses in the identity's current quota period (`add`), or exactly so many left "
        "(`set_remaining`), shared by all of its keys; the answer's `quota_remaining` says "
        "what is left. Recorded in the audit log as `identity.quota`. An identity without a "
        "quota: 409 `no_quota`. " + MANAGER,
        200,
        "The identity, with what is left of its quota.",
        (*REQUEST, 404, *WITH_BODY, 409),
        response=schemas.Identity,
        body=quota_schemas.Grant,
        roles=ROLES,
        idempotent=True,
    )
)
@idempotency.idempotent
def grant_identity_quota(reference: str):
    data = quota_schemas.grant.load(json_object())
    return service.grant_quota(auth.caller(), reference, data)


@bp.get("/<path:reference>/usage")
@documented(
    Operation(
        "Get an identity's usage",
        "The usage of the keys the identity holds, added up, in the shape of a key's usage "
        "(`since`, `until`, `granularity`). A path that ends in `/usage` is the usage of the "
        "identity named before it when there is one, else the identity it names whole "
        "(`external_id:a/usage`). " + READER,
        200,
        "The identity's usage in the window.",
        (*REQUEST, 404, 422),
        response=usage_schemas.IdentityUsage,
        query=usage_schemas.UsageArguments,
        roles=MANAGING_ROLES,
    )
)
def get_identity_usage(reference: str):
    return _identity_or_usage(reference + USAGE)


def _identity_or_usage(path: str):
    """What a GET of `/api/identities/<path>` answers, whichever of the two rules matched it:
    the usage of the identity named before a last `/usage`, else the identity named whole."""
    caller = auth.caller()
    named = path.endswith(USAGE) and service.named(caller.organization_id, path[: -len(USAGE)])
    if not named:
        return service.dump_identity(service.find_identity(caller, path))
    return _usage(service.in_reach(caller, named))  # read once, fenced as any read


def _usage(identity: service.Identity):
    arguments = usage_schemas.usage_arguments.load(query_arguments())
    counted = usage.identity_usage(identity.row_id, identity.id, **arguments)
    return usage_schemas.identity_usage.dump(counted)
