"""The blueprint at /api/keys: five thin views (load, call the service, dump)."""

from __future__ import annotations

from flask import Blueprint, request, url_for

from app import auth, limits
from app.keys import schemas, service
from app.request_body import json_object

bp = Blueprint("keys", __name__, url_prefix="/api/keys")
bp.before_request(auth.authenticate)
limits.protect(bp)


@bp.after_request
def no_store(response):
    """Key data is never kept by a browser or a proxy."""
    # add, not set: nothing else gives these answers a Cache-Control (the tests check there
    # is exactly one), and set searches the headers for one first: 2.5 times the work.
    response.headers.add("Cache-Control", "no-store")
    return response


@bp.get("")
def list_keys():
    query = {
        name: values[0] if len(values) == 1 else values for name, values in request.args.lists()
    }
    arguments = schemas.list_arguments.load(query) if query else schemas.list_defaults
    return schemas.dump_page(service.list_keys(auth.caller(), **arguments))


@bp.post("")
def create_key():
    data = schemas.create_key.load(json_object())
    key, full_key = service.create_key(auth.caller(), data)
    location = url_for("keys.get_key", reference=key.identifier)
    return schemas.created_key(key, full_key), 201, {"Location": location}


@bp.get("/<reference>")
def get_key(reference: str):
    return schemas.dump_key(service.find_key(auth.caller(), reference))


@bp.put("/<reference>")
def update_key(reference: str):
    caller = auth.caller()
    key = service.find_key(caller, reference)
    data = schemas.update_key.load(json_object())
    return schemas.dump_key(service.update_key(caller, key, data))


@bp.delete("/<reference>")
def delete_key(reference: str):
    caller = auth.caller()
    service.delete_key(caller, service.find_key(caller, reference))
    return "", 204
