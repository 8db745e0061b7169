"""POST /mcp: the MCP server's endpoint (docs/design.md, "MCP"). What comes before the
protocol is the service's own, as on every endpoint, in the problem shape: routing (GET and
DELETE, an event stream and a session's end, which a stateless server has none of, are 405
before the SDK sees them), authentication and its abuse limits, `last_used`, the body (415,
413, 400: a JSON object), and, for a tool call, the key's own limit and usage (docs/design.md,
"Promises kept by default": the protocol's other messages are no use of the key). The protocol is
the SDK's (app/mcp/server.py), made on this worker's first /mcp request."""

from __future__ import annotations

import io
import json
import threading
from typing import TYPE_CHECKING

from flask import Blueprint, Flask, Response, current_app, g, request

from app.access import auth
from app.domain import credentials
from app.domain.scopes import SDK_INTEGRATION
from app.http.challenges import Challenge
from app.http.errors import PROBLEM_JSON, ApiError
from app.http.operations import (
    ANY_REQUEST,
    BEARER,
    ERROR_MEANINGS,
    PROBLEM,
    WITH_BODY,
    Operation,
    documented,
)
from app.http.request_body import json_object
from app.mcp import CALLER, MAKING_TOOLS

if TYPE_CHECKING:  # imported on first use only: it imports the SDK
    from app.mcp.server import Runtime

bp = Blueprint("mcp", __name__, url_prefix="/mcp")

CHALLENGE = Challenge("Bearer", "mcp")
# The one message that is a use of the key (docs/design.md, "Promises kept by default"): the
# protocol's others (initialize, notifications, tools/list, ping, server/discover) are under the
# abuse limits alone.
TOOL_CALL = "tools/call"
_BUILDING = threading.Lock()

JSON_RPC_MESSAGE = {
    "type": "object",
    "description": "A JSON-RPC 2.0 message: a request (with `id`), a notification, or an "
    "answer (`result` or `error`).",
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "method": {"type": "string"},
        "params": {"type": "object"},
        "result": {"type": "object"},
        "error": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
    },
    "required": ["jsonrpc"],
}


@bp.before_request
def authenticate() -> None:
    """An sdk_integration key as a Bearer token, behind the abuse limits: 401 with a Bearer
    challenge for none, another scheme, or a bad or deleted key (saying invalid_token for a
    token presented, app/http/challenges.py); 403 for a key of another kind. The key's policy
    refuses every message, but a message is a use of the key (its own limit, its usage)
    only once its body shows a tool call: mcp() says."""
    g.holder = auth.authenticate(
        challenge=CHALLENGE, schemes=(credentials.BEARER,), door=auth.MCP, is_use=False
    )
    g.caller = g.holder.caller
    if g.caller.kind != SDK_INTEGRATION:
        only = "Only an sdk_integration key may use the MCP server."
        raise auth.refused(auth.MCP, ApiError(403, "forbidden", only))


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
@documented(
    Operation(
        "MCP server",
        "One JSON-RPC message of the Model Context Protocol over Streamable HTTP: stateless "
        "(no session), answered in JSON, for every protocol version the `mcp` SDK serves. "
        "Its tools are the twins of the key operations (`tools/list` lists them). Needs an "
        "`sdk_integration` key as a Bearer token: none, another scheme, or a bad key is 401 "
        '(`WWW-Authenticate: Bearer realm="mcp"`, with `error="invalid_token"` and the '
        "detail as `error_description` for a key presented), another kind of key 403. The "
        "body is read as every JSON body is (415, 413, 400) before the protocol sees it. "
        "A `tools/call` is a use of the key, which its own rate limit (429) and its usage "
        "count, and, for `create_key` and `rotate_key`, its quota; the protocol's other "
        "messages are not.",
        200,
        "The JSON-RPC answer to a request: its result, or a JSON-RPC error.",
        (*ANY_REQUEST, 401, 403, 429, *WITH_BODY),
        response=JSON_RPC_MESSAGE,
        body=JSON_RPC_MESSAGE,
        schemes=(BEARER,),
        roles=(SDK_INTEGRATION,),
        # What the protocol (the SDK) answers, beside the service's own refusals.
        responses={
            202: {"description": "A notification or an answer, accepted; no body."},
            400: {
                "description": ERROR_MEANINGS[400] + " Or a JSON object that is no JSON-RPC "
                "message of the protocol (a JSON-RPC error).",
                "content": {
                    PROBLEM_JSON: {"schema": PROBLEM},
                    "application/json": {"schema": JSON_RPC_MESSAGE},
                },
            },
            406: {
                "description": "The request's Accept header does not take application/json.",
                "content": {"application/json": {"schema": JSON_RPC_MESSAGE}},
            },
        },
    )
)
def mcp() -> Response:
    message = json_object()  # read as every JSON body is: 415, 413, 400 (a batch included)
    if message.get("method") == TOOL_CALL:  # well formed or not: whatever may run a tool
        params = message.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        makes = isinstance(tool, str) and tool in MAKING_TOOLS  # a create or a rotation
        auth.spend(g.holder, auth.MCP, CHALLENGE, quota=makes)
    body = json.dumps(message).encode()
    environ = {
        **request.environ,
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        CALLER: auth.caller(),
    }
    return Response.from_app(_runtime(current_app._get_current_object()), environ, buffered=True)
