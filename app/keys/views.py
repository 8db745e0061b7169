"""The blueprint at /api/keys: thin views (load, call the service, dump), each with its
operation in the OpenAPI document."""

from __future__ import annotations

from flask import Blueprint, url_for

from app import idempotency
from app.access import auth
from app.domain.scopes import SDK_INTEGRATION
from app.http.operations import KEYS_REQUEST, MANAGING, WITH_BODY, Operation, documented
from app.http.request_body import has_body, json_object, larger_body, query_arguments
from app.keys import bodies, import_schemas, imports, schemas, service
from app.quotas import schemas as quota_schemas

bp = Blueprint("keys", __name__, url_prefix="/api/keys")
bp.before_request(auth.require_managing_key)

# The organization's lifetime rule, as create, update and rotate say it.
ORGANIZATION_POLICY = (
    "An `expires_at` the body names must be within the organization's "
    "`max_key_lifetime_days` from now (null is refused too when it has one), else 403 "
    "`organization_policy` naming `expires_at` and the latest allowed."
)
LOCATION = {
    "Location": {
        "description": "The path of the new key: `/api/keys/<identifier>`.",
        "required": True,
        "schema": {"type": "string"},
    }
}


@bp.get("")
@documented(
    Operation(
        "List API keys",
        "The keys of the caller's organization, oldest first (ties by identifier), one page "
        "at a time, optionally of one kind, state, use, `enabled=true|false`, with "
        "metadata members (`metadata[<name>]=<value>`, exact, several combine), and "
        "`outside_policy=true|false` (keys that expire later than the organization's "
        "`max_key_lifetime_days` allows from now, or never; with no such rule, none). " + MANAGING,
        200,
        "One page of keys, and how many there are in all.",
        (*KEYS_REQUEST, 422),
        response=schemas.KeyPage,
        query=schemas.ListArguments,
    )
)
def list_keys():
    query = query_arguments()
    arguments = schemas.list_arguments.load(query) if query else schemas.list_defaults
    return bodies.dump_page(service.list_keys(auth.caller(), **arguments))


@bp.post("")
@documented(
    Operation(
        "Create an API key",
        "A new key in the caller's organization. The response is the only one that carries "
        "the full `key`. " + MANAGING + " Every scope of the new key (given for `custom`, "
        "fixed by the kind otherwise) must be held by the caller, else 403 "
        "`scope_exceeds_caller`; its `allowed_ips`, `expires_at`, `rate_limit` and `quota` "
        "may not exceed the caller's, else 403 `exceeds_caller` naming the field, and where "
        "the body names none of them, the key takes the caller's. "
        + ORGANIZATION_POLICY
        + " A key that names no `expires_at` gets the latest the policy allows (or the "
        "caller's, if sooner); one that names no `rate_limit` gets the policy's "
        "`default_rate_limit` (within the caller's). At `max_keys`: 409 `key_limit_reached`.",
        201,
        "The new key, with its full value.",
        (*KEYS_REQUEST, *WITH_BODY, 409),
        response=schemas.KeyOutput,
        body=schemas.CreateKey,
        headers=LOCATION,
        idempotent=True,
    )
)
@idempotency.idempotent
@auth.makes_keys
def create_key():
    data = schemas.create_key.load(json_object())
    key, full_key = service.create_key(auth.caller(), data)
    location = url_for("keys.get_key", reference=key.identifier)
    return bodies.created_key(key, full_key), 201, {"Location": location}


@bp.post("/import")
@documented(
    Operation(
        "Import API keys",
        "Bring in 1 to 1,000 keys made elsewhere (or exported from another API Keys "
        "Service), all or none: each with its full `key` (16 to 256 printable ASCII "
        "characters, any format) or its SHA-256 digest (`key_sha256`: 64 hexadecimal digits, "
        "or base64), a create's fields, and `created` and `last_used` (not in the future; "
        "`expires_at` may be past: the key comes in expired). An entry refused: 422 naming "
        "each as `keys[<index>].<field>`; a key the service already knows, in any "
        "organization: 409 `key_exists` naming the entry. Each key is within the caller's "
        "scopes, place, time, rate and quota (403 `scope_exceeds_caller` or "
        "`exceeds_caller`, naming the entry and field; where an entry names none, it takes "
        "the caller's), and the organization's policy, as a create is (403 "
        "`organization_policy`; 409 `key_limit_reached`). Recorded as one `key.imported` "
        "event per key. An imported key authenticates at every door like a key made here; it "
        "is shown as its first 8 characters and `...`, or, imported by its digest alone, as "
        "`imported:` and 8 hexadecimal digits of the digest. Needs an `sdk_integration` key "
        "(any other: 403 `forbidden`). The body may be up to 4 MiB.",
        201,
        "How many keys came in, and each as the API shows it (never a full key).",
        (*KEYS_REQUEST, *WITH_BODY, 409),
        response=import_schemas.ImportedKeys,
        body=import_schemas.ImportKeys,
        roles=(SDK_INTEGRATION,),
        idempotent=True,
    )
)
@larger_body("IMPORT_MAX_CONTENT_LENGTH")
@idempotency.idempotent
@auth.makes_keys
def import_keys():
    caller = auth.caller()
    imports.require_importer(caller)
    keys = imports.import_keys(caller, import_schemas.load_import(json_object()))
    return {"imported": len(keys), "keys": [bodies.dump_key(key) for key in keys]}, 201


@bp.get("/<reference>")
@documented(
    Operation(
        "Get an API key",
        "One key of the caller's organization. " + MANAGING,
        200,
        "The key.",
        (*KEYS_REQUEST, 404),
        response=schemas.KeyOutput,
    )
)
def get_key(reference: str):
    return bodies.dump_key(service.find_key(auth.caller(), reference))


@bp.put("/<reference>")
@documented(
    Operation(
        "Update an API key",
        "Change a key (a partial update: each field it names is replaced, the others stay): "
        "`name`, `scopes`, `expires_at` (null: no expiry), `enabled`, `allowed_ips`, "
        "`rate_limit`, `metadata`. A rotated key's expiry may only come earlier (else 409 "
        "`already_rotated`). "
        + MANAGING
        + " The caller must hold every scope of the key (else 403 `forbidden`) and every "
        "new scope (else 403 `scope_exceeds_caller`); the `allowed_ips`, `expires_at`, "
        "`rate_limit` and `quota` it names may not exceed the caller's (else 403 "
        "`exceeds_caller`), a key changing itself included: no key loosens its own bounds. "
        + ORGANIZATION_POLICY
        + " An update that names no `expires_at` leaves it as it is.",
        200,
        "The updated key.",
        (*KEYS_REQUEST, 404, *WITH_BODY, 409),
        response=schemas.KeyOutput,
        body=schemas.UpdateKey,
    )
)
def update_key(reference: str):
    caller = auth.caller()
    key = service.find_key(caller, reference)
    data = schemas.update_key.load(json_object())
    return bodies.dump_key(service.update_key(caller, key, data))


@bp.delete("/<reference>")
@documented(
    Operation(
        "Delete an API key",
        "Revoke a key at once and for good. "
        + MANAGING
        + " The caller must hold every scope of the key (else 403 `forbidden`).",
        204,
        "Deleted: the key no longer works.",
        (*KEYS_REQUEST, 404),
    )
)
def delete_key(reference: str):
    caller = auth.caller()
    service.delete_key(caller, service.find_key(caller, reference))
    return "", 204


@bp.post("/<reference>/rotate")
@documented(
    Operation(
        "Rotate an API key",
        "Replace a key: a new key with its name, kind, scopes, `allowed_ips`, `rate_limit` "
        "and `metadata` (the full value, once; enabled), expiring at the body's `expires_at`, "
        "else at the old key's expiry while that is ahead, else never; and the old key "
        "deleted at once (`grace_seconds` 0, the default) or expiring `grace_seconds` from "
        "now (or sooner, if it already expires sooner), written together. A key already "
        "replaced is 409 `already_rotated`. The body is optional (no body needs no "
        "Content-Type). "
        + MANAGING
        + " The caller must hold every scope of the key (else 403 `forbidden`); the "
        "replacement's `allowed_ips`, expiry, `rate_limit` and `quota` are the caller's "
        "wherever the old key's exceed them (a later `expires_at` named: 403 "
        "`exceeds_caller`). Works for immutable kinds and for expired keys. "
        + ORGANIZATION_POLICY
        + " A replacement that names none expires as above, but no later than the policy "
        "allows. A rotation with `grace_seconds` keeps the old key beside the new one: at "
        "`max_keys` it is 409 `key_limit_reached` (a rotation without grace always has "
        "room).",
        201,
        "The replacement, with its full value.",
        (*KEYS_REQUEST, 404, *WITH_BODY, 409),
        response=schemas.KeyOutput,
        body=schemas.RotateKey,
        body_required=False,
        headers=LOCATION,
        idempotent=True,
    )
)
@idempotency.idempotent
@auth.makes_keys
def rotate_key(reference: str):
    caller = auth.caller()
    key = service.find_key(caller, reference)
    data = schemas.rotate_key.load(json_object() if has_body() else {})
    replacement, full_key = service.rotate_key(caller, key, data)
    location = url_for("keys.get_key", reference=replacement.identifier)
    return bodies.created_key(replacement, full_key), 201, {"Location": location}


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
        response=schemas.KeyOutput,
        body=quota_schemas.Grant,
        idempotent=True,
    )
)
@idempotency.idempotent
def grant_quota(reference: str):
    caller = auth.caller()
    key = service.find_key(caller, reference)
    data = quota_schemas.grant.load(json_object())
    return bodies.dump_key(service.grant_quota(caller, key, data))
