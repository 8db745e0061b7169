"""POST /mcp: the MCP server's endpoint (CONTRACT.md section 13). What comes before the
protocol is the service's own, as on every endpoint, in the problem shape: routing (GET and
DELETE, an event stream and a session's end, which a stateless server has none of, are 405
before the SDK sees them), authentication and its abuse limits, `last_used`, and the body
(415, 413, 400: a JSON object). The protocol is the SDK's (app/mcp/server.py), made on this
worker's first /mcp request."""

from __future__ import annotations

import io
import json
import threading
from typing import TYPE_CHECKING

from flask import Blueprint, Flask, Response, current_app, g, request

from app import auth, credentials
from app.errors import ApiError
from app.request_body import json_object
from app.scopes import SDK_INTEGRATION

if TYPE_CHECKING:  # imported on first use only: it imports the SDK
    from app.mcp.server import Runtime

bp = Blueprint("mcp", __name__, url_prefix="/mcp")
bp.after_request(auth.no_store)

# Where a request's environ carries its caller to the tool it calls.
CALLER = "api_keys.caller"
CHALLENGE = ("WWW-Authenticate", 'Bearer realm="mcp"')
_BUILDING = threading.Lock()


@bp.before_request
def authenticate() -> None:
    """An sdk_integration key as a Bearer token, behind the abuse limits: 401 with a Bearer
    challenge for none, another scheme, or a bad or deleted key; 403 for a key of
    another kind."""
    g.caller = auth.authenticate(challenge=CHALLENGE, schemes=(credentials.BEARER,))
    if g.caller.kind != SDK_INTEGRATION:
        raise ApiError(403, "forbidden", "Only an sdk_integration key may use the MCP server.")


def _runtime(app: Flask) -> Runtime:
    """The application's MCP server, made on first use (it imports the SDK)."""
    runtime = app.extensions.get("mcp")
    if runtime is None:
        with _BUILDING:
            runtime = app.extensions.get("mcp")
            if runtime is None:
                from app.mcp.server import Runtime

                runtime = app.extensions["mcp"] = Runtime(app)
    return runtime


@bp.post("")
def mcp() -> Response:
    body = json.dumps(json_object()).encode()  # read as every JSON body is: 415, 413, 400
    environ = {
        **request.environ,
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        CALLER: auth.caller(),
    }
    return Response.from_app(_runtime(current_app._get_current_object()), environ, buffered=True)
