"""The blueprint at /api/forward-auth and /api/introspect: a key checked for another
service. Both authenticate as every endpoint does, count under RATELIMIT_INTROSPECT, and
record the checked key's use."""

from __future__ import annotations

from urllib.parse import quote

from flask import Blueprint, current_app, request

from app.access import auth, limits, policy
from app.checks import schemas
from app.domain import bindings, keyformat, reach
from app.domain.scopes import KINDS, to_names
from app.domain.timestamps import iso, unix_seconds
from app.http.operations import (
    KEYS_REQUEST,
    MANAGING,
    RATELIMIT_HEADERS,
    WITH_BODY,
    Operation,
    documented,
)
from app.http.request_body import form_or_json_object
from app.keys.schemas import metadata_json

bp = Blueprint("checks", __name__, url_prefix="/api")

# A gateway forwards whatever method its client used.
ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
INACTIVE = {"active": False}
# A header value is Latin-1 on the wire: what is not printable ASCII, and %, is sent
# percent-encoded as UTF-8 (RFC 3986), so a name of plain ASCII arrives as it is.
_PRINTABLE_BUT_PERCENT = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


def header_value(text: str) -> str:
    """`text` as an ASCII header value: printable ASCII as it is, the rest percent-encoded."""
    return quote(text, safe=_PRINTABLE_BUT_PERCENT)


# RFC 7662's token_type for the keys of this service.
KEY_TYPE = "api_key"

FORWARDED_HEADERS = {
    "X-Api-Key-Id": {
        "description": "The key's identifier.",
        "required": True,
        "schema": {"type": "string"},
    },
    "X-Api-Key-Kind": {
        "description": "The key's kind.",
        "required": True,
        "schema": {"type": "string", "enum": list(KINDS)},
    },
    "X-Api-Key-Scopes": {
        "description": "The key's scopes, space-separated, in the scope table's order.",
        "required": True,
        "schema": {"type": "string"},
    },
    "X-Api-Key-Organization": {
        "description": "The name of the key's organization; what is not printable ASCII, "
        "and `%`, percent-encoded as UTF-8.",
        "required": True,
        "schema": {"type": "string"},
    },
    "X-Api-Key-Metadata": {
        "description": "The key's metadata as compact ASCII JSON (`{}` when it has none).",
        "required": True,
        "schema": {"type": "string"},
    },
    "X-Api-Key-Identity": {
        "description": "The external id of the identity that holds the key, percent-encoded "
        "as the organization's name is; absent for a key of no identity.",
        "required": False,
        "schema": {"type": "string"},
    },
    **RATELIMIT_HEADERS,
}
INTROSPECTION = {
    "type": "object",
    "description": "RFC 7662's answer: when `active` is false, only `active`, and `code` "
    "(`retry_after`) for a key of the caller's organization its policy refuses now.",
    "properties": {
        "active": {"type": "boolean"},
        "scope": {
            "type": "string",
            "description": "The key's scopes, space-separated, in the scope table's order.",
        },
        "client_id": {"type": "string", "description": "The key's identifier."},
        "token_type": {"type": "string", "enum": [KEY_TYPE]},
        "iat": {"type": "integer", "description": "When the key was made, Unix seconds."},
        "exp": {
            "type": "integer",
            "description": "When the key expires, Unix seconds; absent when it does not.",
        },
        "kind": {"type": "string", "enum": list(KINDS)},
        "name": {"type": "string"},
        "sub": {
            "type": "string",
            "description": "The external id of the identity that holds the key; absent for "
            "a key of no identity.",
        },
        "identity": {
            "type": "object",
            "description": "The identity that holds the key; absent for a key of none.",
            "properties": {"id": {"type": "string"}, "external_id": {"type": "string"}},
            "required": ["id", "external_id"],
            "additionalProperties": False,
        },
        "limit": {
            "type": "string",
            "enum": ["maker", "identity"],
            "description": "With `rate_limited` or `quota_exceeded` by a limit the key shares: "
            "whose it was (a key's that made it, or its identity's); absent for its own.",
        },
        "metadata": {
            "type": "object",
            "description": "The key's metadata (active answers only).",
            "additionalProperties": {"type": "string"},
        },
        "code": {
            "type": "string",
            "enum": list(policy.REFUSALS),
            "description": "Why a key of the caller's organization is not active now; "
            "absent for unknown, malformed, deleted or other organizations' keys (and, "
            "asked by a key of an identity, other identities' keys and keys of none).",
        },
        "retry_after": {
            "type": "integer",
            "minimum": 1,
            "description": "With `rate_limited`: whole seconds until the key's own limit "
            "lets it through again.",
        },
        "quota_remaining": {
            "type": "integer",
            "minimum": 0,
            "description": "What is left in the current period of the quota with the fewest "
            "uses left of those that bind the key (its own, its makers', its identity's; "
            "active answers of keys bound by a quota only).",
        },
    },
    "required": ["active"],
    "additionalProperties": False,
}


@bp.route("/forward-auth", methods=ANY_METHOD)
@documented(
    Operation(
        "Forward auth",
        "For a gateway (nginx `auth_request`, Traefik `ForwardAuth`, Caddy "
        "`forward_auth`): any method, body ignored. Checks the request's own key (any "
        "kind, telemetry included) against every scope named in the query "
        "(`?scope=monitor:read&scope=site:read`; none: any valid key passes). 204 with "
        "the key's facts in headers for the gateway to pass upstream; the key's policy "
        "first (401 `expired_key` or `disabled_key`, 403 `ip_not_allowed` for the "
        "client's address, 429 `rate_limited` past its own `rate_limit`, with the RateLimit "
        "headers, 429 `quota_exceeded` past its quota, with the Quota headers); 401 for "
        "no, bad or deleted keys; 403 `forbidden` naming the missing "
        "scopes; 422 for a scope no key can hold. Checking is a use of the key. Counted per "
        "checked key under `RATELIMIT_INTROSPECT`.",
        204,
        "The key holds every scope named.",
        (*KEYS_REQUEST, 422),
        query=schemas.ForwardAuthArguments,
        headers=FORWARDED_HEADERS,
        roles=KINDS,
        # A gateway forwards any method: each its own operation id, GET's the view's name.
        operation_ids={m: f"forward_auth_{m.lower()}" for m in ANY_METHOD if m != "GET"},
    )
)
def forward_auth():
    """204 when the request's own key holds every scope the query names, with what the
    gateway passes upstream; 401, 403 naming the missing scopes, 422 for an unknown one."""
    holder = auth.authenticate(rate=limits.INTROSPECT, door=auth.FORWARD_AUTH, facts=True)
    caller = holder.caller
    required = schemas.required_scopes(request.query_string)
    auth.require_held(required, caller.scope_bits, auth.FORWARD_AUTH)
    headers = {
        "X-Api-Key-Id": caller.identifier,
        "X-Api-Key-Kind": caller.kind,
        "X-Api-Key-Scopes": " ".join(to_names(caller.scope_bits)),
        "X-Api-Key-Organization": header_value(holder.organization),
        "X-Api-Key-Metadata": metadata_json(caller.metadata),
    }
    if caller.identity is not None:
        headers["X-Api-Key-Identity"] = header_value(caller.identity.external_id)
    return "", 204, headers


@bp.post("/introspect")
@documented(
    Operation(
        "Introspect an API key",
        "RFC 7662 token introspection, for a service that accepts this organization's keys: "
        "the key to check as `token`, in a form (`application/x-www-form-urlencoded`, as "
        "RFC 7662 clients send it) or a JSON object, with the address it is used from as "
        "an optional `client_ip` (a key with `allowed_ips` is never active without one). "
        '`{"active": false}` alone for unknown, malformed, deleted or other organizations\' '
        "keys, and, asked by a key that belongs to an identity, for the keys of another "
        'identity or of none; `{"active": false, "code": ...}` (and `retry_after` for '
        "`rate_limited`) for a key of the organization its policy refuses now; its facts and "
        "metadata for one that authenticates. Checking is a use of the key (`last_used`, "
        "its own rate limit). Counted per calling key under `RATELIMIT_INTROSPECT`. " + MANAGING,
        200,
        "Whether the key authenticates now, and if it does, its facts.",
        (*KEYS_REQUEST, *WITH_BODY),
        response=INTROSPECTION,
        body=schemas.Introspection,
        form=True,
    )
)
def introspect():
    """RFC 7662: the facts of the key within the caller's reach (app/domain/reach.py)
    named by `token` when it authenticates now; `{"active": false}` and nothing else for
    anything else."""
    asker = auth.managing_caller(rate=limits.INTROSPECT, quota=True)
    body = schemas.introspection.load(form_or_json_object())
    token = body["token"]
    holder = None
    if keyformat.is_presentable(token, current_app.config["KEY_PREFIX"]):
        holder = auth.found(token, limits.generation(), asker.organization_id, True)
    if holder is not None and not reach.of(asker).sees(holder.caller.identity_id):
        holder = None  # beyond the asker's identity: as another organization's key
    if holder is None:
        auth.checked(auth.INTROSPECTION, auth.UNAUTHORIZED)
        return INACTIVE
    client_ip = body.get("client_ip")
    address = None if client_ip is None else str(client_ip)
    decided = auth.use(holder, lambda: address, auth.INTROSPECTION)
    if decided.refusal is not None:
        answer: dict = {"active": False, "code": decided.refusal}
        if decided.refusal == policy.RATE_LIMITED and decided.allowance is not None:
            answer["retry_after"] = decided.allowance.reset
        if decided.limit not in (None, bindings.KEY):  # section 21's answer for its own
            answer["limit"] = decided.limit
        return answer
    # Its facts as the read that found it gave them: one read of the key, not two.
    key = holder.caller
    answer = {
        "active": True,
        "scope": " ".join(to_names(key.scope_bits)),
        "client_id": key.identifier,
        "token_type": KEY_TYPE,
        "iat": unix_seconds(holder.created),
    }
    if key.expires_at is not None:
        answer["exp"] = unix_seconds(iso(key.expires_at))
    answer |= {"kind": key.kind, "name": holder.name, "metadata": dict(key.metadata)}
    if key.identity is not None:
        answer["sub"] = key.identity.external_id
        answer["identity"] = key.identity._asdict()
    if decided.quota is not None:
        answer["quota_remaining"] = decided.quota.remaining
    return answer
