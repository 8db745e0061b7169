"""The MCP server (docs/design.md, "MCP") on the official SDK (PyPI `mcp`), made for one
application by the worker that first serves /mcp (app/mcp/views.py): a worker that never
does never imports the SDK and never pays its memory.

The SDK serves ASGI; the workers are sync WSGI. a2wsgi hands each /mcp request to an event
loop on a thread of the worker's own (a loop made before gunicorn forks would be lost in
the worker), where the SDK's session manager runs, entered once as its lifespan, and waits
for the answer. The transport is stateless Streamable HTTP with JSON answers: nothing
outlives a request, so any worker serves any call. The SDK's low-level server gives the
JSON-RPC, the protocol versions and their handshakes, and the protocol's errors; the tools'
arguments reach app/mcp/tools.py as sent, to be checked once, by the REST twin's schemas
(the SDK's MCPServer would check them first with pydantic models of its own). Tools are
plain functions, run on a thread of the loop's pool inside the application's context: a
database call blocks that thread, never the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from functools import partial
from importlib.metadata import version
from typing import Any

import anyio.to_thread
from a2wsgi import ASGIMiddleware
from flask import Flask
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import (
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    ToolAnnotations,
)
from mcp_types import Tool as ListedTool

from app.domain import keyformat
from app.domain.credentials import Caller
from app.http import errors
from app.mcp import CALLER, schemas, tools
from app.openapi import document as openapi
from app.serving.logs import MaskKeys

NAME = "api-keys-service"
INSTRUCTIONS = (
    "Manage the API keys of the organization whose sdk_integration key authenticates you. "
    "Keys are shown as `<identifier>...`; only create_key's and rotate_key's answers carry "
    "a full key, shown once and never again. A refused call is an error result whose text "
    "is the API's problem body as JSON, with a stable `code`."
)
# Seconds to wait for the loop to start or stop.
TIMEOUT = 30.0


def _listed(tool: tools.Tool, document: dict) -> ListedTool:
    return ListedTool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=schemas.input_schema(document, tool.name, tool.names),
        output_schema=schemas.output_schema(document, tool.name),
        annotations=ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,  # the organization's keys, nothing beyond
        ),
    )


def _answer(tool: tools.Tool, body: dict | None) -> CallToolResult:
    """The REST body as structured content, and as text for clients that read text: the
    body as JSON, or the tool's sentence of it."""
    if body is None:
        return CallToolResult(content=[TextContent(text=tool.no_body)])
    text = TextContent(text=tool.text(body)) if tool.text else _json(body)
    return CallToolResult(content=[text], structured_content=body)


def _refused(error: Exception) -> CallToolResult:
    """The REST refusal's problem body as JSON text, with no structured content: a result
    that has some must match the tool's output schema, which clients of the TypeScript SDK
    check on every result, an error's included."""
    body = errors.refusal_document(tools.refusal(error))
    return CallToolResult(content=[_json(body)], is_error=True)


def _json(body: dict) -> TextContent:
    return TextContent(text=json.dumps(body, separators=(",", ":")))


def _call(
    app: Flask, tool: tools.Tool, caller: Caller, arguments: dict[str, Any]
) -> CallToolResult:
    """One tool call, in the application's context: the REST body, or the REST refusal's
    problem body with isError."""
    with app.app_context():
        try:
            return _answer(tool, tool.call(caller, arguments))
        except Exception as error:  # every refusal and fault answers as REST's would
            return _refused(error)


async def _masked_errors(ctx: Any, call_next: Any) -> Any:
    """The SDK's middleware that masks key-shaped text in a protocol error, as the tools'
    refusals are (errors.problem_document): the SDK's errors repeat what a request named
    (an unknown method is its `data`), and no error repeats a key its request carried."""
    try:
        return await call_next(ctx)
    except MCPError as error:
        said = error.error
        data = keyformat.masked(said.data) if isinstance(said.data, str) else said.data
        raise MCPError(code=said.code, message=keyformat.masked(said.message), data=data) from None


def _server(app: Flask) -> Server:
    document = openapi.document(app)
    by_name = {tool.name: tool for tool in tools.TOOLS}
    listed = ListToolsResult(tools=[_listed(tool, document) for tool in tools.TOOLS])
    schemas = {tool.name: tool.input_schema for tool in listed.tools}

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return listed

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        caller = ctx.request.scope["wsgi_environ"][CALLER]  # a2wsgi keeps the environ
        work = partial(_call, app, tool, caller, params.arguments or {})
        return await anyio.to_thread.run_sync(work)

    server = Server(
        NAME,
        version=version("api-keys-service"),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=schemas.get,
    )
    server.middleware.append(_masked_errors)
    return server


def _quiet_sdk_log() -> None:
    """The SDK's debug lines repeat what clients send (a full key, say): its log shows
    warnings and worse only, with keys masked, on standard error."""
    log = logging.getLogger("mcp")
    log.setLevel(logging.WARNING)
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.addFilter(MaskKeys())
        log.addHandler(handler)
        log.propagate = False


async def _run(
    manager: StreamableHTTPSessionManager, started: concurrent.futures.Future, stop: asyncio.Event
) -> None:
    """The session manager's lifespan, entered on the loop and held until `stop` (for the
    worker's life): the tools' threads belong to it."""
    async with manager.run():
        started.set_result(None)
        await stop.wait()


class Runtime:
    """The SDK's server for one application, and the loop thread that runs it; a WSGI
    application that answers one /mcp request."""

    def __init__(self, app: Flask) -> None:
        _quiet_sdk_log()
        manager = StreamableHTTPSessionManager(
            _server(app),
            json_response=True,
            stateless=True,
            # Every request carries its key in Authorization, which no other site's page can
            # make a browser send here: the SDK's DNS-rebinding check (421 for any Host but
            # localhost) would only refuse the service's own name.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp", daemon=True)
        self.thread.start()
        started: concurrent.futures.Future = concurrent.futures.Future()
        self._stop = asyncio.Event()
        self._running = asyncio.run_coroutine_threadsafe(
            _run(manager, started, self._stop), self.loop
        )
        concurrent.futures.wait(
            [started, self._running], TIMEOUT, concurrent.futures.FIRST_COMPLETED
        )
        if not started.done():  # the next /mcp request tries again
            self._end_loop()
            failure = self._running.exception(0) if self._running.done() else None
            raise RuntimeError("the MCP server did not start") from failure
        self.wsgi = ASGIMiddleware(StreamableHTTPASGIApp(manager), loop=self.loop)

    def __call__(self, environ: dict, start_response: Any) -> Any:
        return self.wsgi(environ, start_response)

    def close(self) -> None:
        """Leave the SDK's lifespan and end the loop's thread: the tools' thread ends too,
        and its database connection is closed. A worker just exits; the tests, which make
        an application per test, close each."""
        self.loop.call_soon_threadsafe(self._stop.set)
        self._running.result(TIMEOUT)
        self._end_loop()

    def _end_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT)
        self.loop.close()
