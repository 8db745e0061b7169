"""Configuration: the defaults, and every environment variable that overrides one.

Precedence, lowest first: DEFAULTS, ``instance/config.py``, the environment, the
``test_config`` given to create_app.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import limits
from flask import Flask
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.domain import addresses, keyformat
from app.webhooks.targets import TIMEOUT as WEBHOOK_TRY_SECONDS

DEFAULTS: dict[str, Any] = {
    # SQLite in the instance folder: nothing to install or start.
    "SQLALCHEMY_DATABASE_URI": "sqlite:///api-keys.sqlite3",
    # No SQL parameter (a digest) in any exception message or log line.
    "SQLALCHEMY_ENGINE_OPTIONS": {"hide_parameters": True},
    # Request bodies over 64 KiB are refused with 413.
    "MAX_CONTENT_LENGTH": 64 * 1024,
    # POST /api/keys/import's body: 1,000 keys with every field set fit in 4 MiB.
    "IMPORT_MAX_CONTENT_LENGTH": 4 * 1024 * 1024,
    "KEY_PREFIX": keyformat.DEFAULT_PREFIX,
    "LAST_USED_RESOLUTION": 60,
    "RATELIMIT_ENABLED": True,
    "RATELIMIT_STORAGE_URI": "host://",
    "RATELIMIT_KEY_PREFIX": "api-keys",
    # The limits' storage (Redis) unreachable: keep serving, the rate limits counted in
    # this host's file (RATELIMIT_FALLBACK_STORAGE_URI) and uses that would spend a quota
    # refused with 503 until it answers again, rather than answer 503 to every request.
    "RATELIMIT_IN_MEMORY_FALLBACK_ENABLED": True,
    # Where this host counts while Redis does not answer: its file, in the instance folder.
    "RATELIMIT_FALLBACK_STORAGE_URI": "host://",
    # Seconds between two records of this host in the database (0: none, no check).
    "HOSTS_HEARTBEAT_SECONDS": 30,
    "RATELIMIT_AUTH_FAILURES": "100/minute",
    "RATELIMIT_PER_KEY": "6000/minute",
    "RATELIMIT_INTROSPECT": "60000/minute",
    "TRUSTED_PROXIES": 0,
    # The MCP server at /mcp (docs/design.md, "MCP").
    "MCP_ENABLED": True,
    # GET /metrics (docs/design.md, "Metrics"): served, to this machine only unless
    # METRICS_TOKEN, which has no default, is set.
    "METRICS_ENABLED": True,
    # Per-key usage (docs/design.md, "Usage"): counted in memory, written in batches.
    "USAGE_ENABLED": True,
    "USAGE_FLUSH_SECONDS": 10.0,
    "USAGE_RETENTION_DAYS": 90,
    # Webhooks (docs/design.md, "Webhooks"): only https to public addresses, unless allowed
    # otherwise for development and tests.
    "WEBHOOK_ALLOW_PRIVATE": False,
    # Each worker's sender thread, which delivers the events (app/webhooks/sender.py).
    "WEBHOOK_SENDER_ENABLED": True,
    "WEBHOOK_POLL_SECONDS": 1.0,
    "WEBHOOK_SCAN_SECONDS": 60.0,
    # Seconds between the tries of a delivery: 8 tries over 27.5 hours (the Standard
    # Webhooks' reference schedule), then the delivery has failed.
    "WEBHOOK_RETRY_DELAYS": (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0),
    # How long a worker's claim of a try lasts before another worker may take it over.
    "WEBHOOK_LEASE_SECONDS": 30.0,
    "WEBHOOK_RETENTION_DAYS": 30,
    # OPTIONS is no method of this API: 405 in the problem shape, as for any other.
    "PROVIDE_AUTOMATIC_OPTIONS": False,
}


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError("must be 0 or more")
    return number


def parsed_trusted_proxies(value: str) -> int | tuple[addresses.Network, ...]:
    """TRUSTED_PROXIES: a number of hops (believed from any peer, as before), or the
    proxies' addresses and networks, comma-separated (believed only from a peer in them)."""
    value = value.strip()
    if not value:
        return 0
    if value.isdigit():
        return int(value)
    networks = []
    for entry in value.split(","):
        try:
            networks.append(addresses.network(entry.strip()))
        except ValueError:
            raise ValueError(
                "must be a number of proxies, or their addresses and networks separated "
                f"by commas (127.0.0.1,10.0.0.0/8); {entry.strip()!r} is neither"
            ) from None
    return tuple(networks)


def normalized_database_url(value: str) -> str:
    """The URL, with PostgreSQL's bare schemes (postgres://, postgresql://) sent to psycopg 3,
    the driver the service installs (SQLAlchemy would pick psycopg2 for them)."""
    try:
        url = make_url(value)
    except ArgumentError:
        raise ValueError("is not an SQLAlchemy database URL") from None
    if url.drivername in ("postgres", "postgresql"):
        return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    return value


def _positive_number(value: str) -> float:
    number = float(value)
    if not number > 0 or number == float("inf"):
        raise ValueError("must be a number of seconds over 0")
    return number


def _lease(value: str) -> float:
    """A claim of a webhook try, which must outlast the try (else another sender takes it)."""
    seconds = _positive_number(value)
    if seconds <= WEBHOOK_TRY_SECONDS:
        raise ValueError(f"must be more than {WEBHOOK_TRY_SECONDS:g} seconds, a try's longest")
    return seconds


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError("must be 1 or more")
    return number


def _boolean(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _delays(value: str) -> tuple[float, ...]:
    delays = tuple(_positive_number(part) for part in value.split(","))
    if list(delays) != sorted(delays):
        raise ValueError("must be seconds that never decrease, separated by commas")
    return delays


def _rate(value: str) -> str:
    limits.parse(value)  # ValueError when it is not a rate such as "100/minute"
    return value


# RFC 6750's b64token: what a client can send after "Bearer " as it is.
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def _bearer_token(value: str) -> str:
    if not _BEARER_TOKEN.fullmatch(value):
        raise ValueError("must be a Bearer token: A-Z a-z 0-9 - . _ ~ + /, then any =")
    return value


def _key_prefix(value: str) -> str:
    if not keyformat.PREFIX_PATTERN.fullmatch(value):
        raise ValueError(f"must match {keyformat.PREFIX_PATTERN.pattern}")
    return value


# Environment variable -> (configuration key, parser). Why each one exists:
ENVIRONMENT: dict[str, tuple[str, Callable[[str], Any]]] = {
    # Use PostgreSQL, or another SQLite file, instead of instance/api-keys.sqlite3.
    "DATABASE_URL": ("SQLALCHEMY_DATABASE_URI", normalized_database_url),
    # This host's own folder instead of the project's instance/ (read before anything else,
    # by instance_path below): its config.py, its limits file, a relative SQLite path. Hosts
    # sharing one checkout each name their own.
    "INSTANCE_PATH": ("INSTANCE_PATH", str),
    # A prefix of the organization's own, so that secret scanners can be taught it.
    "KEY_PREFIX": ("KEY_PREFIX", _key_prefix),
    # Seconds between two writes of a key's last_used: precision against write load.
    "LAST_USED_RESOLUTION": ("LAST_USED_RESOLUTION", _non_negative_int),
    # Switch the abuse limits off, for load tests and benchmarks.
    "RATELIMIT_ENABLED": ("RATELIMIT_ENABLED", _boolean),
    # Where the limits count (app/access/counting): host:// shares them between the workers of
    # this host (a file in the instance folder), redis://... between hosts too; memory://
    # counts in one process only, refused under several gunicorn workers.
    "RATELIMIT_STORAGE_URI": ("RATELIMIT_STORAGE_URI", str),
    # Seconds between two records of this host in the database, by each worker (0: none).
    "HOSTS_HEARTBEAT_SECONDS": ("HOSTS_HEARTBEAT_SECONDS", _non_negative_int),
    # Where this host counts while Redis does not answer (host://: its instance folder's file).
    "RATELIMIT_FALLBACK_STORAGE_URI": ("RATELIMIT_FALLBACK_STORAGE_URI", str),
    # Several deployments (or test runs) on one Redis keep their counters apart.
    "RATELIMIT_KEY_PREFIX": ("RATELIMIT_KEY_PREFIX", str),
    # Failed authentications a client address may make per period before it gets 429.
    "RATELIMIT_AUTH_FAILURES": ("RATELIMIT_AUTH_FAILURES", _rate),
    # Requests one key may make per period before it gets 429.
    "RATELIMIT_PER_KEY": ("RATELIMIT_PER_KEY", _rate),
    # Checks per key per period, by forward auth (the checked key) and introspection (the
    # calling key), instead of RATELIMIT_PER_KEY: other services check on every request.
    "RATELIMIT_INTROSPECT": ("RATELIMIT_INTROSPECT", _rate),
    # The proxies or load balancers in front, by address or network (127.0.0.1,10.0.0.0/8):
    # X-Forwarded-For and X-Forwarded-Proto are believed only from a peer in them. A number
    # (the old form) believes that many hops from any peer; 0 or empty believes none.
    "TRUSTED_PROXIES": ("TRUSTED_PROXIES", parsed_trusted_proxies),
    # Switch the MCP server off: /mcp is then an unknown path, as in a service without one.
    "MCP_ENABLED": ("MCP_ENABLED", _boolean),
    # Switch GET /metrics off: it is then an unknown path, and no request is counted.
    "METRICS_ENABLED": ("METRICS_ENABLED", _boolean),
    # Let a Prometheus on another machine scrape /metrics: only this Bearer token may then
    # read it, from anywhere; without it, only clients on this machine may.
    "METRICS_TOKEN": ("METRICS_TOKEN", _bearer_token),
    # Switch per-key usage counting off (GET /api/keys/<key>/usage then shows no new use),
    # for benchmarks that isolate its cost.
    "USAGE_ENABLED": ("USAGE_ENABLED", _boolean),
    # Seconds between two batches of a worker's usage counts: a use shows within twice this,
    # and a killed worker loses at most this much; shorter means more writes.
    "USAGE_FLUSH_SECONDS": ("USAGE_FLUSH_SECONDS", _positive_number),
    # Days of usage counts kept: older hours are removed, at most once an hour.
    "USAGE_RETENTION_DAYS": ("USAGE_RETENTION_DAYS", _positive_int),
    # Development and tests only: webhooks may go to http and to private, loopback and
    # link-local addresses (a receiver on this machine). Never in production: a key holder
    # could then make the service call the hosts of its own network.
    "WEBHOOK_ALLOW_PRIVATE": ("WEBHOOK_ALLOW_PRIVATE", _boolean),
    # Switch the workers' webhook senders off (events are still written, and sent by any
    # worker whose sender runs).
    "WEBHOOK_SENDER_ENABLED": ("WEBHOOK_SENDER_ENABLED", _boolean),
    # Seconds between two looks of a worker's sender for due tries.
    "WEBHOOK_POLL_SECONDS": ("WEBHOOK_POLL_SECONDS", _positive_number),
    # Seconds between two looks for keys whose expiry is to be announced.
    "WEBHOOK_SCAN_SECONDS": ("WEBHOOK_SCAN_SECONDS", _positive_number),
    # Seconds between a delivery's tries, comma-separated, growing: shorter for tests.
    "WEBHOOK_RETRY_DELAYS": ("WEBHOOK_RETRY_DELAYS", _delays),
    # Seconds a worker's claim of a try lasts, more than the try's 5 s timeout: a worker
    # killed mid-delivery has its try taken over after this.
    "WEBHOOK_LEASE_SECONDS": ("WEBHOOK_LEASE_SECONDS", _lease),
    # Days a finished delivery (delivered or failed) and its event are kept, for
    # GET /api/webhooks/<id>/deliveries; older ones are removed, at most once an hour.
    "WEBHOOK_RETENTION_DAYS": ("WEBHOOK_RETENTION_DAYS", _positive_int),
}

PARSERS: dict[str, Callable[[str], Any]] = dict(ENVIRONMENT.values())

# A Redis that does not answer is given up on within a second (the limits then count in
# memory), well within gunicorn's 30 s worker timeout; options in the URL's query win.
REDIS_TIMEOUTS = {"socket_connect_timeout": 1, "socket_timeout": 1}


def instance_path() -> str | None:
    """The instance folder INSTANCE_PATH names, made absolute (relative to the working
    directory) as Flask needs it; None for Flask's own, the project's instance/."""
    value = os.environ.get("INSTANCE_PATH", "")
    return os.path.abspath(value) if value else None


def load(app: Flask, test_config: Mapping[str, Any] | None) -> None:
    """Fill app.config, and refuse to start on a value that makes no sense."""
    app.config.from_mapping(DEFAULTS)
    app.config.from_pyfile("config.py", silent=True)
    for variable, (key, _) in ENVIRONMENT.items():
        if variable in os.environ:
            app.config[key] = os.environ[variable]
    if test_config is not None:
        app.config.from_mapping(test_config)
    for key, parse in PARSERS.items():
        value = app.config.get(key)
        if isinstance(value, str):
            try:
                app.config[key] = parse(value)
            except ValueError as error:
                # The value is not repeated: a database URL may hold a password.
                raise RuntimeError(f"configuration {key}: {error}") from None
    if app.config["RATELIMIT_STORAGE_URI"].startswith("redis"):
        options = app.config.get("RATELIMIT_STORAGE_OPTIONS", {})
        app.config["RATELIMIT_STORAGE_OPTIONS"] = {**REDIS_TIMEOUTS, **options}
