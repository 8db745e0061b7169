"""The blueprint at /api/keys: thin views (load, call the service, dump)."""

from __future__ import annotations

from flask import Blueprint, url_for

from app import auth
from app.keys import schemas, service
from app.request_body import has_body, json_object, query_arguments

bp = Blueprint("keys", __name__, url_prefix="/api/keys")
bp.before_request(auth.require_managing_key)


@bp.get("")
def list_keys():
    query = query_arguments()
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


@bp.post("/<reference>/rotate")
def rotate_key(reference: str):
    caller = auth.caller()
    key = service.find_key(caller, reference)
    data = schemas.rotate_key.load(json_object() if has_body() else {})
    replacement, full_key = service.rotate_key(caller, key, data)
    location = url_for("keys.get_key", reference=replacement.identifier)
    return schemas.created_key(replacement, full_key), 201, {"Location": location}
