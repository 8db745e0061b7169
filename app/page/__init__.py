"""GET /: the page where a person manages their organization's keys with nothing but a key.

The page is the project's own HTML, JavaScript and CSS, served from here with no build
step and nothing from another origin. Its script calls the public REST API (/api/keys)
with the key the person pastes, as any client does: every rule stays in the API.
The scopes, the kinds and their fixed scopes, the audit log's actions and the webhooks'
event types, a key's shape (so that the page can tell a person that what they pasted is not
a whole key before sending it anywhere), the longest grace period of a rotation and a
quota's periods and largest figure come from app/domain/scopes.py, app/audit,
app/domain/keyformat.py, app/keys/schemas.py, app/domain/periods.py and
app/quotas/schemas.py, written into the HTML when it is served (the page runs no inline
script).
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, render_template, request

from app.audit import ACTIONS
from app.audit.outbox import EVENT_TYPES
from app.domain import keyformat
from app.domain.periods import PERIODS
from app.domain.scopes import FIXED, KINDS, SCOPES, to_names
from app.keys.schemas import MAX_GRACE_SECONDS
from app.quotas.schemas import MAX_QUOTA_REQUESTS

bp = Blueprint(
    "page",
    __name__,
    static_folder="static",
    static_url_path="/page",
    template_folder="templates",
)

# Scripts, styles and requests of this origin only; nothing inline, no eval, no HTML
# written from strings (Trusted Types), no framing, no native form submission (a form
# that JavaScript did not handle must not put what it holds in a URL).
POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)
# Revalidated on every use (with an ETag or Last-Modified): a new version shows at once.
REVALIDATE = "no-cache"
# The audit log's actions in people's words; the page shows each beside its code where
# operators filter (tests/test_page.py checks that every action of app/audit has words).
ACTION_WORDS = {
    "key.created": "Created",
    "key.updated": "Updated",
    "key.rotated": "Rotated",
    "key.deleted": "Deleted",
    "key.revoked": "Revoked as leaked",
    "key.quota": "Quota granted",
    "key.quota_exhausted": "Quota used up",
    "key.expiring": "Expiring soon",
    "key.expired": "Expired",
    "webhook.created": "Webhook created",
    "webhook.updated": "Webhook updated",
    "webhook.deleted": "Webhook deleted",
    "webhook.new_secret": "Webhook secret renewed",  # nosec B105: an action in words
    "webhook.disabled": "Webhook disabled after failing",
    "key.imported": "Imported",
    "identity.created": "Identity created",
    "identity.updated": "Identity updated",
    "identity.deleted": "Identity deleted",
    "identity.quota_exhausted": "Identity's quota used up",
    "identity.quota": "Identity's quota granted",
}
# The events a webhook endpoint takes, in people's words, where the Webhooks view and the
# audit log name them (tests/test_page.py checks that every event type has words).
EVENT_WORDS = {
    "key.created": "Key created",
    "key.updated": "Key updated",
    "key.rotated": "Key rotated",
    "key.deleted": "Key deleted",
    "key.revoked": "Key revoked as leaked",
    "key.quota": "Uses granted to a key's quota",
    "key.quota_exhausted": "Key's quota used up",
    "key.expiring": "Key expiring soon",
    "key.expired": "Key expired",
    "identity.quota_exhausted": "Identity's quota used up",
}


@bp.after_request
def headers(response: Response) -> Response:
    """The page and its files: never sniffed, never framed, no Referer sent from them."""
    response.headers["Content-Security-Policy"] = POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers.setdefault("Cache-Control", REVALIDATE)
    return response


@bp.get("/")
def page() -> Response:
    body = render_template(
        "page.html",
        kinds=[(kind, to_names(FIXED[kind]) if kind in FIXED else None) for kind in KINDS],
        key_shape={
            "tail-length": keyformat.TAIL_LENGTH,
            "checksum-length": keyformat.CHECKSUM_LENGTH,
            "identifier-lengths": (
                f"{keyformat.MIN_IDENTIFIER_LENGTH} {keyformat.MAX_IDENTIFIER_LENGTH}"
            ),
            "alphabet": keyformat.ALPHABET,
            "shown-suffix": keyformat.SHOWN_SUFFIX,
        },
        max_grace=MAX_GRACE_SECONDS,
        max_quota=MAX_QUOTA_REQUESTS,
        periods=PERIODS,
        scopes=SCOPES,
        actions=[(action, ACTION_WORDS.get(action, action)) for action in ACTIONS],
        event_words=[(event, EVENT_WORDS.get(event, event)) for event in EVENT_TYPES],
    )
    response = current_app.response_class(body, mimetype="text/html")
    response.add_etag()
    return response.make_conditional(request)
