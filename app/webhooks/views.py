"""The blueprint at /api/webhooks: an organization's webhook endpoints and their
deliveries, for its sdk_integration keys; thin views (load, call the service, dump), each
with its operation in the OpenAPI document."""

from __future__ import annotations

from flask import Blueprint, g, url_for

from app import idempotency
from app.access import auth
from app.domain.scopes import SDK_INTEGRATION
from app.http.operations import ANY_REQUEST, WITH_BODY, Operation, documented
from app.http.request_body import json_object, query_arguments
from app.webhooks import schemas, service

bp = Blueprint("webhooks", __name__, url_prefix="/api/webhooks")


@bp.before_request
def require_manager() -> None:
    g.caller = auth.managing_caller()
    service.require_manager(g.caller)


MANAGER = (
    "Needs an `sdk_integration` key of the organization that belongs to no identity (any "
    "other key gets 403 `forbidden`)."
)
REQUEST = (*ANY_REQUEST, 401, 403, 429)
ROLES = (SDK_INTEGRATION,)
LOCATION = {
    "Location": {
        "description": "The path of the new endpoint: `/api/webhooks/<id>`.",
        "required": True,
        "schema": {"type": "string"},
    }
}


@bp.get("")
@documented(
    Operation(
        "List webhook endpoints",
        "The organization's webhook endpoints, oldest first (at most 20). " + MANAGER,
        200,
        "The endpoints.",
        REQUEST,
        response=schemas.EndpointList,
        roles=ROLES,
    )
)
def list_endpoints():
    return schemas.endpoint_list.dump({"data": service.list_endpoints(auth.caller())})


@bp.post("")
@documented(
    Operation(
        "Create a webhook endpoint",
        "A new endpoint that receives the organization's key events of the types it names, "
        "signed as the Standard Webhooks specification says. The answer is the only one that "
        "carries its signing `secret`. The `url` must be `https` and resolve to public "
        "addresses only (else 422). At most 20 endpoints an organization (else 409 "
        "`webhook_limit_reached`). " + MANAGER,
        201,
        "The new endpoint, with its signing secret.",
        (*REQUEST, *WITH_BODY, 409),
        response=schemas.EndpointWithSecret,
        body=schemas.CreateEndpoint,
        headers=LOCATION,
        roles=ROLES,
        idempotent=True,
    )
)
@idempotency.idempotent
def create_endpoint():
    data = schemas.create_endpoint.load(json_object())
    endpoint = service.create_endpoint(auth.caller(), data)
    location = url_for("webhooks.get_endpoint", endpoint_id=endpoint.public_id)
    return schemas.endpoint_with_secret.dump(endpoint), 201, {"Location": location}


@bp.get("/<endpoint_id>")
@documented(
    Operation(
        "Get a webhook endpoint",
        "One endpoint of the organization. " + MANAGER,
        200,
        "The endpoint.",
        (*REQUEST, 404),
        response=schemas.EndpointOutput,
        roles=ROLES,
    )
)
def get_endpoint(endpoint_id: str):
    return schemas.endpoint_output.dump(service.find_endpoint(auth.caller(), endpoint_id))


@bp.put("/<endpoint_id>")
@documented(
    Operation(
        "Update a webhook endpoint",
        "Change an endpoint (a partial update): `url`, `events`, `description`, `enabled`. "
        "Enabling an endpoint again forgets its failures, and its pending deliveries (the "
        "events held while it was disabled among them) are due at once, oldest first. " + MANAGER,
        200,
        "The updated endpoint.",
        (*REQUEST, 404, *WITH_BODY),
        response=schemas.EndpointOutput,
        body=schemas.UpdateEndpoint,
        roles=ROLES,
    )
)
def update_endpoint(endpoint_id: str):
    caller = auth.caller()
    endpoint = service.find_endpoint(caller, endpoint_id)
    data = schemas.update_endpoint.load(json_object())
    return schemas.endpoint_output.dump(service.update_endpoint(caller, endpoint, data))


@bp.delete("/<endpoint_id>")
@documented(
    Operation(
        "Delete a webhook endpoint",
        "The endpoint and its deliveries, at once: nothing more is sent to it. " + MANAGER,
        204,
        "Deleted.",
        (*REQUEST, 404),
        roles=ROLES,
    )
)
def delete_endpoint(endpoint_id: str):
    caller = auth.caller()
    service.delete_endpoint(caller, service.find_endpoint(caller, endpoint_id))
    return "", 204


@bp.post("/<endpoint_id>/secret")
@documented(
    Operation(
        "Replace a webhook endpoint's secret",
        "A new signing secret, shown in this answer only. The one it replaces keeps signing "
        "beside it for 24 hours (`previous_secret_expires_at`): each delivery carries both "
        "signatures in `webhook-signature` meanwhile. No body. " + MANAGER,
        200,
        "The endpoint, with its new secret.",
        (*REQUEST, 404),
        response=schemas.EndpointWithSecret,
        roles=ROLES,
    )
)
def replace_secret(endpoint_id: str):
    caller = auth.caller()
    endpoint = service.replace_secret(caller, service.find_endpoint(caller, endpoint_id))
    return schemas.endpoint_with_secret.dump(endpoint)


@bp.get("/<endpoint_id>/deliveries")
@documented(
    Operation(
        "List a webhook endpoint's deliveries",
        "Its deliveries, newest first, one page at a time, optionally by `status` "
        "(`pending`, `delivered`, `failed`): each with its event, tries, last status code "
        "and time. " + MANAGER,
        200,
        "One page of deliveries, and how many match in all.",
        (*REQUEST, 404, 422),
        response=schemas.DeliveryPage,
        query=schemas.DeliveryArguments,
        roles=ROLES,
    )
)
def list_deliveries(endpoint_id: str):
    caller = auth.caller()
    endpoint = service.find_endpoint(caller, endpoint_id)
    arguments = schemas.delivery_arguments.load(query_arguments())
    return schemas.delivery_page.dump(service.list_deliveries(caller, endpoint, **arguments))


@bp.post("/<endpoint_id>/deliveries/<delivery_id>/retry")
@documented(
    Operation(
        "Retry a webhook delivery",
        "Send a delivery again now, with the same `webhook-id`, whatever became of it "
        "(delivered, failed or waiting for its next try); 409 `delivery_in_progress` while "
        "a try of it is under way. No body. " + MANAGER,
        202,
        "The delivery, due now.",
        (*REQUEST, 404, 409),
        response=schemas.DeliveryOutput,
        roles=ROLES,
    )
)
def retry_delivery(endpoint_id: str, delivery_id: str):
    caller = auth.caller()
    endpoint = service.find_endpoint(caller, endpoint_id)
    return schemas.delivery_output.dump(service.retry_delivery(caller, endpoint, delivery_id)), 202
