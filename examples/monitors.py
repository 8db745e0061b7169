"""A host application: a small monitors service whose views need the keys' scopes
(app/extension.py). It runs two ways:

    # embedded: the service's own application, the same process and database, serving
    # the keys of one organization (here the one the first start makes)
    API_KEYS_ORGANIZATION=default flask --app examples.monitors:embedded run --port 5001

    # remote: any Flask application, asking a running service (keys cached 10 seconds),
    # serving the keys of the managing key's organization
    API_KEYS_URL=http://127.0.0.1:5000 API_KEYS_KEY=<a managing key> \\
        flask --app examples.monitors:remote run --port 5001

    curl -u "$KEY:" http://127.0.0.1:5001/monitors

tests/test_extension.py runs the first, tests/server/test_extension_remote.py the second;
docs/extension.md shows both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Flask, request

from app import create_app
from app.extension import ApiKeys, current_key, require_scopes

monitors = Blueprint("monitors", __name__, url_prefix="/monitors")
MONITORS = [{"id": 1, "url": "https://example.com/health"}]


@monitors.get("")
@require_scopes("monitor:read")
def list_monitors():
    return {
        "monitors": MONITORS,
        "seen_by": current_key.identifier,
        "organization": current_key.organization,
    }


@monitors.post("")
@require_scopes("monitor:read", "monitor:write")
def add_monitor():
    monitor = {
        "id": len(MONITORS) + 1,
        "url": str((request.get_json(silent=True) or {}).get("url")),
    }
    return {"monitor": monitor, "added_by": current_key.identifier}, 201


def embedded(
    test_config: Mapping[str, Any] | None = None, organization: str | None = None
) -> Flask:
    app = create_app(test_config)
    app.register_blueprint(monitors)
    ApiKeys(app, organization=organization or os.environ.get("API_KEYS_ORGANIZATION"))
    return app


def remote(url: str | None = None, key: str | None = None, cache_seconds: float = 10.0) -> Flask:
    app = Flask(__name__)
    app.register_blueprint(monitors)
    service = url or os.environ["API_KEYS_URL"]
    ApiKeys(
        app,
        introspect_url=service.rstrip("/") + "/api/introspect",
        key=key or os.environ["API_KEYS_KEY"],
        cache_seconds=cache_seconds,
    )
    return app
