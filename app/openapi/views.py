"""GET /openapi.json and GET /docs: the OpenAPI document and an interactive reference
(Swagger UI), without authentication and without the internet.

Swagger UI's JavaScript and CSS are the files the flask-swagger-ui package installs
(Swagger UI 5, which reads OpenAPI 3.1), served from here; the page loads no script or
style from anywhere else, and runs none inline, so its Content-Security-Policy allows
scripts from this origin only.
"""

from __future__ import annotations

from importlib.resources import files

from flask import Blueprint, Response, abort, current_app, request, send_from_directory

from app.openapi import document as openapi

bp = Blueprint("docs", __name__)

SWAGGER_UI = files("flask_swagger_ui") / "dist"
# The files of the package the page uses; anything else under /docs/ is 404.
ASSETS = frozenset({"swagger-ui.css", "index.css", "swagger-ui-bundle.js", "favicon-32x32.png"})
# Revalidated on every use (with the ETag): a new version of the service shows at once.
REVALIDATE = "no-cache"
# The package's files change only with an upgrade of the service.
ASSET_MAX_AGE = 24 * 60 * 60

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>API Keys Service: API reference</title>
  <link rel="stylesheet" href="docs/swagger-ui.css">
  <link rel="stylesheet" href="docs/index.css">
  <link rel="icon" type="image/png" href="docs/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="docs/swagger-ui-bundle.js"></script>
  <script src="docs/start.js"></script>
</body>
</html>
"""
# Relative URLs throughout, so that the page also works under a path prefix of a proxy.
# No validator: Swagger UI would send the document to an outside service.
START = """window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout"
  });
});
"""
PAGE_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        # Swagger UI's React components set style attributes.
        "style-src 'self' 'unsafe-inline'",
        # Its icons are data: URLs in its CSS.
        "img-src 'self' data:",
        # The document, and the requests of "Try it out".
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)


@bp.after_request
def headers(response: Response) -> Response:
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers.setdefault("Cache-Control", REVALIDATE)
    return response


def _revalidated(body: str, mimetype: str) -> Response:
    """`body` with an ETag, and 304 for a client that already holds it."""
    response = current_app.response_class(body, mimetype=mimetype)
    response.add_etag()
    return response.make_conditional(request)


@bp.get("/openapi.json")
def document() -> Response:
    return _revalidated(openapi.text(current_app), "application/json")


@bp.get("/docs")
def page() -> Response:
    response = _revalidated(PAGE, "text/html")
    response.headers["Content-Security-Policy"] = PAGE_POLICY
    return response


@bp.get("/docs/start.js")
def start() -> Response:
    return _revalidated(START, "text/javascript")


@bp.get("/docs/<name>")
def asset(name: str) -> Response:
    if name not in ASSETS:
        abort(404)
    response = send_from_directory(str(SWAGGER_UI), name, max_age=ASSET_MAX_AGE)
    response.cache_control.public = True
    return response
