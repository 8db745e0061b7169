"""create_app() builds the application, step by named step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask

from app import cli, config, page
from app.access import auth, limits, seen
from app.audit import views as audit_views
from app.checks import views as checks
from app.extensions import db
from app.http import errors, proxies
from app.http.json_provider import CompactJSONProvider
from app.identities import views as identities
from app.keys import views
from app.leaks import views as leaks
from app.mcp import views as mcp
from app.openapi import views as docs
from app.organizations import views as organization_views
from app.serving import health, hosts, logs, metrics
from app.storage import database
from app.usage import counter as usage_counter
from app.usage import views as usage_views
from app.webhooks import announcements
from app.webhooks import sender as webhook_sender
from app.webhooks import targets as webhook_targets
from app.webhooks import views as webhooks


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    # The package: its name, and its instance folder (INSTANCE_PATH, or the project's instance/).
    app = Flask("app", instance_path=config.instance_path(), instance_relative_config=True)
    register_config(app, test_config)
    register_proxies(app)
    register_logging(app)
    register_extensions(app)
    register_blueprints(app)
    register_errorhandlers(app)
    register_commands(app)
    return app


def register_config(app: Flask, test_config: Mapping[str, Any] | None) -> None:
    config.load(app, test_config)
    app.json = CompactJSONProvider(app)  # fields in the order the specification lists them


def register_proxies(app: Flask) -> None:
    """Behind TRUSTED_PROXIES proxies, the client's address and scheme are the ones they
    forward (X-Forwarded-For, X-Forwarded-Proto), not the nearest proxy's."""
    proxies.install(app, app.config["TRUSTED_PROXIES"])


def register_logging(app: Flask) -> None:
    logs.register(app)
    if app.config["WEBHOOK_ALLOW_PRIVATE"]:  # for development and tests: said at each start
        app.logger.warning(webhook_targets.ALLOW_PRIVATE_WARNING)


def register_extensions(app: Flask) -> None:
    database.engine_options(app)
    db.init_app(app)
    limits.init_app(app)
    seen.init_app(app)
    metrics.init_app(app)  # before any blueprint: it times every request
    hosts.init_app(app)  # this host's heartbeat in the database, and its counts checked
    usage_counter.init_app(app)  # each check of a key, counted in memory, written in batches
    webhook_sender.init_app(app)  # each worker delivers the webhooks' events
    announcements.init_app(app)  # a quota used up, recorded by the use that used it up
    database.configure(app)


def register_blueprints(app: Flask) -> None:
    # `//api//keys` is an unknown path (404 in the problem shape), not a redirect.
    app.url_map.merge_slashes = False
    app.register_blueprint(views.bp)
    app.register_blueprint(audit_views.bp)
    app.register_blueprint(usage_views.bp)  # /api/keys/<key>/usage
    app.register_blueprint(organization_views.bp)  # /api/organization: its policy
    app.register_blueprint(checks.bp)  # /api/forward-auth, /api/introspect
    app.register_blueprint(leaks.bp)  # /api/revoke
    app.register_blueprint(webhooks.bp)  # /api/webhooks
    app.register_blueprint(identities.bp)  # /api/identities
    app.register_blueprint(health.bp)
    app.register_blueprint(docs.bp)  # /openapi.json and /docs, outside the keys' auth
    if app.config["MCP_ENABLED"]:
        app.register_blueprint(mcp.bp)  # POST /mcp; the SDK is imported on its first request
    if app.config["METRICS_ENABLED"]:
        app.register_blueprint(metrics.bp)  # GET /metrics, for Prometheus on this machine
    app.register_blueprint(page.bp)  # / and /page/: the page for people, a client of /api/keys
    app.after_request(auth.no_store)  # every answer under /api and /mcp


def register_errorhandlers(app: Flask) -> None:
    errors.register(app)


def register_commands(app: Flask) -> None:
    cli.register(app)
