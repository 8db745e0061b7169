"""The blueprint of a key's usage: GET /api/keys/<key>/usage (docs/design.md, "Usage")."""

from __future__ import annotations

from flask import Blueprint

from app.access import auth
from app.http.operations import KEYS_REQUEST, MANAGING, Operation, documented
from app.http.request_body import query_arguments
from app.usage import schemas, service

bp = Blueprint("usage", __name__, url_prefix="/api/keys")
bp.before_request(auth.require_managing_key)


@bp.get("/<reference>/usage")
@documented(
    Operation(
        "Get an API key's usage",
        "How often a key of the caller's organization was checked, by UTC hour or day "
        "(`granularity`, default `day`) over `since`..`until` (default: the last 30 days; at "
        "most 90), widened to whole buckets: allowed, refused by code, and the scopes "
        "checked by forward auth's `scope` and the extension's `require_scopes` for the "
        "uses they let through. Every bucket is there, zeros included, oldest first. "
        "`unused_scopes` lists the key's scopes that no check named in the window (null "
        "when no check named any). Counts are written by each worker at most every "
        "`USAGE_FLUSH_SECONDS`: a use shows within twice that. " + MANAGING,
        200,
        "The key's usage in the window.",
        (*KEYS_REQUEST, 404, 422),
        response=schemas.KeyUsage,
        query=schemas.UsageArguments,
    )
)
def get_key_usage(reference: str):
    arguments = schemas.usage_arguments.load(query_arguments())
    return schemas.key_usage.dump(service.key_usage(auth.caller(), reference, **arguments))
