"""What a view says of itself in the OpenAPI document, beside its route: `@documented(
Operation(...))` records the statuses it answers, with which bodies and problem codes, and
which key it needs; app/openapi/document.py only assembles what the views carry.

The shared words live here too: what each error status means, the statuses every request
may meet, who may manage keys. Nothing here imports a blueprint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from marshmallow import Schema

from app.domain.scopes import KINDS, MANAGING_KINDS

BASIC, BEARER = "basicAuth", "bearerAuth"
# A key may use the key-management endpoints when its kind is one of these; the
# security requirements name them as roles (OpenAPI 3.1 allows role names for any scheme).
MANAGING_ROLES = tuple(kind for kind in KINDS if kind in MANAGING_KINDS)
MANAGING = (
    "Needs a key of kind " + " or ".join(f"`{role}`" for role in MANAGING_ROLES) + " (a "
    "telemetry key gets 403)."
)

# Every request may meet these: gunicorn's refusals (app/serving/gunicorn_errors.py), a fault,
# the database gone.
ANY_REQUEST = (400, 414, 417, 431, 500, 501, 503)
# Every /api/keys request may meet these too: authentication and the abuse limits.
KEYS_REQUEST = (*ANY_REQUEST, 401, 403, 429)
WITH_BODY = (413, 415, 422)

# What each error status means, as the document says it.
ERROR_MEANINGS = {
    400: "The request is not HTTP the server can read, or its body is not a JSON object "
    "with unique member names.",
    401: "No key, a malformed Authorization header, or an unknown or deleted key "
    "(`unauthorized`); an expired key (`expired_key`); a disabled key (`disabled_key`).",
    403: "A telemetry key (`forbidden`), a key that lacks scopes of the key it would alter "
    "or revoke (`forbidden`), or scopes beyond the calling key's own "
    "(`scope_exceeds_caller`), or a place, time or rate beyond it (`exceeds_caller`, naming "
    "`allowed_ips`, `expires_at` or `rate_limit`); on /mcp, any "
    "key but an sdk_integration key (`forbidden`); a key used from outside its "
    "`allowed_ips` (`ip_not_allowed`); an expiry beyond the organization's policy "
    "(`organization_policy`, naming `expires_at` and the latest allowed); for "
    "/api/organization, any key but an sdk_integration key (`forbidden`).",
    404: "No key of the caller's organization has this reference.",
    409: "The scopes of a telemetry or sdk_integration key cannot change (`immutable_key`); "
    "a rotated key cannot be rotated again nor its end postponed (`already_rotated`); the "
    "organization holds the most keys its policy allows (`key_limit_reached`); an "
    "organization has 20 webhook endpoints already (`webhook_limit_reached`); a try of the "
    "webhook delivery is under way (`delivery_in_progress`); the first request with this "
    "`Idempotency-Key` is still running (`idempotency_in_progress`, with `Retry-After`); "
    "an imported key the service already knows (`key_exists`); a shown form that several "
    "imported keys share (`ambiguous_key`: name one by its identifier).",
    413: "The request body is larger than 64 KiB.",
    414: "The request line is longer than the server accepts.",
    415: "The request body is not sent as application/json.",
    417: "The request's Expect header cannot be met.",
    422: "A field or query parameter is refused; `errors` names each with its messages; an "
    "`Idempotency-Key` used in the last 24 hours for another request "
    "(`idempotency_key_reused`).",
    429: "An abuse limit, or the key's own `rate_limit` (`rate_limited`), or its quota "
    "(`quota_exceeded`) refused the request; retry after `Retry-After` seconds (absent for a "
    "`lifetime` quota, which is never renewed).",
    431: "Too many request headers, or one too large.",
    500: "The server could not complete the request.",
    501: "The request's transfer coding is not supported.",
    503: "The database does not answer, or Redis, which counts the quotas, does not for a "
    "use of one; retry after `Retry-After` seconds.",
}
# The problem codes of the statuses that carry more than errors.CODES's default.
PROBLEM_CODES = {
    401: ("unauthorized", "expired_key", "disabled_key"),
    403: (
        "forbidden",
        "scope_exceeds_caller",
        "exceeds_caller",
        "organization_policy",
        "ip_not_allowed",
    ),
    409: (
        "immutable_key",
        "already_rotated",
        "key_limit_reached",
        "no_quota",
        "webhook_limit_reached",
        "delivery_in_progress",
        "idempotency_in_progress",
        "key_exists",
        "ambiguous_key",
        "identity_exists",
        "identity_in_use",
    ),
    422: ("validation_error", "idempotency_key_reused"),
    429: ("rate_limited", "quota_exceeded"),
    503: ("unavailable", "counts_unavailable"),
}
RETRY_AFTER = {
    "description": "Whole seconds to wait before retrying.",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}
# A key with a rate_limit of its own: its policy and state, as the IETF httpapi draft's
# structured fields (app/access/policy.py), on every REST and forward auth answer.
RATELIMIT_HEADERS = {
    "RateLimit-Policy": {
        "description": 'The key\'s own limit, when it has one: `"key";q=<requests>;w=<seconds>`.',
        "required": False,
        "schema": {"type": "string"},
    },
    "RateLimit": {
        "description": 'What is left of it: `"key";r=<remaining>;t=<seconds until the window '
        "ends>`.",
        "required": False,
        "schema": {"type": "string"},
    },
    "Quota-Remaining": {
        "description": "What is left of the key's quota in the current period, when it has one.",
        "required": False,
        "schema": {"type": "integer", "minimum": 0},
    },
    "Quota-Reset": {
        "description": "Whole seconds until the quota's period ends (absent for `lifetime`).",
        "required": False,
        "schema": {"type": "integer", "minimum": 1},
    },
}
ERROR_HEADERS = {
    401: {
        "WWW-Authenticate": {
            "description": '`Basic realm="api"`; `Bearer realm="mcp"` on /mcp, with '
            '`error="invalid_token"` and the detail as `error_description` for a key '
            "presented and refused (RFC 6750 section 3.1).",
            "required": True,
            "schema": {"type": "string"},
        }
    },
    # A lifetime quota is never renewed: its 429 has no Retry-After.
    429: {"Retry-After": RETRY_AFTER | {"required": False}, **RATELIMIT_HEADERS},
    503: {"Retry-After": RETRY_AFTER},
}
PROBLEM = {"$ref": "#/components/schemas/Problem"}
# The request header of a write that a retry may repeat safely (app/idempotency.py), and
# what marks its replayed answer.
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "1 to 255 printable ASCII characters, a random one (a UUID) per request: "
    "the same key from the same calling key within 24 hours answers what the first request "
    "answered (status, body, the full key of a create included, `Location`), without doing "
    "it again; another request with it: 422 `idempotency_key_reused`; while the first still "
    "runs: 409 `idempotency_in_progress`. Refusals are not kept: a retry of one runs anew.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
}
IDEMPOTENT_REPLAYED = {
    "Idempotent-Replayed": {
        "description": "`true` on an answer replayed for a retry with the same `Idempotency-Key`.",
        "required": False,
        "schema": {"type": "string", "enum": ["true"]},
    }
}


@dataclass(frozen=True)
class Operation:
    """What the schemas and the url_map do not say about one view."""

    summary: str
    description: str
    status: int
    answer: str
    errors: tuple[int, ...]
    response: type[Schema] | dict | None = None
    body: type[Schema] | dict | None = None
    query: type[Schema] | None = None
    headers: dict | None = None
    secured: bool = True
    body_required: bool = True
    # Who may call it, when not every managing kind by either scheme.
    schemes: tuple[str, ...] = (BASIC, BEARER)
    roles: tuple[str, ...] = MANAGING_ROLES
    # Responses of its own, beside (or instead of) the shared error responses.
    responses: Mapping[int, dict] | None = None
    # The body as a form too (RFC 7662 clients send one), beside JSON.
    form: bool = False
    # Where one view answers several methods alike, the ids of the methods whose id is not
    # the view's name.
    operation_ids: Mapping[str, str] | None = None
    # It takes `Idempotency-Key` (app/idempotency.py): a retry answers what the first did.
    idempotent: bool = False


View = TypeVar("View", bound=Callable[..., Any])


def documented(operation: Operation) -> Callable[[View], View]:
    """Record `operation` on the view, for every method of its route."""

    def record(view: View) -> View:
        view.operation = operation  # type: ignore[attr-defined]
        return view

    return record


def operation_of(view: Callable[..., Any]) -> Operation | None:
    return getattr(view, "operation", None)
