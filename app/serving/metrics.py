"""GET /metrics (docs/design.md, "Metrics"): the service's counts in Prometheus's text format,
made by the official prometheus_client.

Under gunicorn, gunicorn.conf.py gives every start a fresh, empty PROMETHEUS_MULTIPROC_DIR
before any worker forks: each worker then writes its counts to memory-mapped files of its
own there (prometheus_client's multiprocess mode, chosen when the library is first imported),
and a scrape, whichever worker answers it, adds up every worker's files, those of a worker
that died included. Elsewhere (flask run, the tests) the counts live in the application's
own registry. The keys by kind and state are read from the database when scraped.

What a request adds: when its answer starts (app/serving/verdicts.py's wrapper, shared with the
usage), two dictionary lookups of children made once per label set (`.labels()` costs more
than the increment) and the increments, in memory or in the worker's files: four per
request with a key (requests, the histogram's sum and bucket, the door's verdict).
`python -m bench.instructions get forward_auth` on 2026-11-25, METRICS_ENABLED=false then
true: GET 794.1k and 820.9k instructions per request (+3.4%), forward auth 929.5k and 961.4k
(+3.4%); with PROMETHEUS_MULTIPROC_DIR set, as under gunicorn, 842.8k (+6.1%) and 978.6k
(+5.3%): each increment of a file costs about 5k instructions more than one in memory. For
metrics and usage together see app/serving/verdicts.py.

No label holds a key, an identifier or an organization's name: endpoints are the routes'
names, never paths, and the rest are fixed sets.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator

from flask import Blueprint, Flask, Response, abort, current_app, request
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    values,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import case, func, select
from sqlalchemy.exc import SQLAlchemyError

from app.domain import addresses
from app.domain.scopes import KINDS
from app.domain.timestamps import utcnow
from app.extensions import db
from app.serving import verdicts
from app.serving.verdicts import Verdicts
from app.storage.models import ApiKey

EXTENSION = "metrics"
# What generate_latest writes: Prometheus's text format, version 0.0.4.
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
# A key check's outcome when the door lets the key through; else the refusal's code.
ALLOWED = verdicts.ALLOWED
# The endpoint of a request that matched no route (404, 405).
NO_ENDPOINT = "none"
# The methods counted by name; any other a client makes up is `other`.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "other"
# From a GET's milliseconds to gunicorn's 30 s timeout.
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STATES = ("active", "expired")


class KeysCollector(Collector):
    """api_keys_keys: every organization's keys by kind and state, counted by one grouped
    query when scraped (so that every worker answers alike, whatever it has served)."""

    def describe(self) -> list[GaugeMetricFamily]:
        return [self._family()]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        expired = case((ApiKey.expires_at <= utcnow(), 1))
        statement = select(ApiKey.kind, func.count(), func.count(expired)).group_by(ApiKey.kind)
        try:
            rows = db.session.execute(statement).all()
        except SQLAlchemyError:
            # The request counts matter most when the database is down: serve them.
            current_app.logger.warning("/metrics: the keys could not be counted", exc_info=True)
            db.session.rollback()
            return
        counts = {kind: (0, 0) for kind in KINDS}
        counts.update((kind, (total, expired)) for kind, total, expired in rows)
        family = self._family()
        for kind, (total, expired) in counts.items():
            family.add_metric([kind, "active"], total - expired)
            family.add_metric([kind, "expired"], expired)
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "api_keys_keys",
            "Keys by kind and state (expired: past their expires_at), read when scraped.",
            labels=["kind", "state"],
        )


class Metrics:
    """One application's metrics, in app.extensions["metrics"]."""

    def __init__(self, multiprocess: bool) -> None:
        self.registry = CollectorRegistry()
        # In multiprocess mode every count is in the files, which the collector reads:
        # registering the metrics as well would export the answering worker's twice.
        own = None if multiprocess else self.registry
        if multiprocess:
            MultiProcessCollector(self.registry)
        self.registry.register(KeysCollector())
        self.requests = Counter(
            "api_keys_requests",
            "Requests answered, by endpoint (the route's name), method and status.",
            ["endpoint", "method", "status"],
            registry=own,
        )
        self.durations = Histogram(
            "api_keys_request_duration_seconds",
            "Time from the request's arrival in the application to its answer, by endpoint.",
            ["endpoint"],
            buckets=DURATION_BUCKETS,
            registry=own,
        )
        self.key_checks = Counter(
            "api_keys_key_checks",
            "Keys presented at a door, by door and outcome (allowed, or the refusal's code).",
            ["door", "outcome"],
            registry=own,
        )
        self.limit_refusals = Counter(
            "api_keys_limit_refusals",
            "Requests refused with 429 by the abuse limits, by limit.",
            ["limit"],
            registry=own,
        )
        self.audit_events = Counter(
            "api_keys_audit_events",
            "Events recorded in the audit log, by action.",
            ["action"],
            registry=own,
        )
        # Each worker's 1 while the shared limits' storage (Redis) does not answer and it
        # counts in this host's file; the highest of the live workers is exported.
        self.counts_degraded = Gauge(
            "api_keys_counts_degraded",
            "1 while the limits' storage (Redis) does not answer: rate limits counted in this"
            " host's file, uses that spend a quota refused with 503 counts_unavailable.",
            multiprocess_mode="livemax",
            registry=own,
        )
        self.counts_apart = Gauge(
            "api_keys_counts_apart",
            "1 while this host counts its limits in its own file (host://) and another host"
            " serves the same database: /healthz answers 503.",
            multiprocess_mode="livemax",
            registry=own,
        )
        # Label values -> the metric's child for them, each made once by `.labels()`.
        self._answered: dict[tuple[str, str, int], Counter] = {}
        self._timed: dict[str, Histogram] = {}
        self._checked: dict[tuple[str, str], Counter] = {}

    def count(self, environ: dict, status: int, seconds: float, doors: Verdicts) -> None:
        """A request whose answer starts: app/serving/verdicts.py's wrapper calls it."""
        served = environ.get("werkzeug.request")
        rule = None if served is None else served.url_rule
        endpoint = NO_ENDPOINT if rule is None else rule.endpoint
        method = environ.get("REQUEST_METHOD")
        labels = (endpoint, method if method in METHODS else OTHER_METHOD, status)
        answered = self._answered.get(labels)
        if answered is None:
            answered = self._answered[labels] = self.requests.labels(*labels)
        answered.inc()
        timed = self._timed.get(endpoint)
        if timed is None:
            timed = self._timed[endpoint] = self.durations.labels(endpoint)
        timed.observe(seconds)
        for door, (_key, outcome, _scopes) in doors.items():
            checked = self._checked.get((door, outcome))
            if checked is None:
                checked = self._checked[door, outcome] = self.key_checks.labels(door, outcome)
            checked.inc()


def init_app(app: Flask) -> None:
    """Count every request of `app` (unless METRICS_ENABLED is false), in the files of
    PROMETHEUS_MULTIPROC_DIR when it is set, else in the application's memory."""
    if not app.config["METRICS_ENABLED"]:
        return
    multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    if multiprocess and values.ValueClass is values.MutexValue:
        # Each worker would count in its own memory, and a scrape show one worker's share.
        raise RuntimeError(
            "PROMETHEUS_MULTIPROC_DIR was set after prometheus_client was imported: set it"
            " before the server imports the application (gunicorn.conf.py does)"
        )
    # The _created series: the start of each worker's counts, which differ between the
    # two modes (the files have none) and tell Prometheus nothing it needs.
    disable_created_metrics()
    metrics = app.extensions[EXTENSION] = Metrics(multiprocess)
    verdicts.count(app, metrics.count)


def _metrics() -> Metrics | None:
    return current_app.extensions.get(EXTENSION)


def limit_refused(rate: str) -> None:
    """A 429 of the abuse limit `rate` (RATELIMIT_PER_KEY is counted as `per_key`)."""
    if metrics := _metrics():
        metrics.limit_refusals.labels(rate.removeprefix("RATELIMIT_").lower()).inc()


def counts_degraded(degraded: bool) -> None:
    """This worker counts in this host's file (True) or in the shared storage again."""
    if metrics := _metrics():
        metrics.counts_degraded.set(1 if degraded else 0)


def counts_apart(apart: bool) -> None:
    """This host counts in its own file while another serves the database (True), or not."""
    if metrics := _metrics():
        metrics.counts_apart.set(1 if apart else 0)


def audit_recorded(action: str) -> None:
    """An event of `action` written to the audit log."""
    if metrics := _metrics():
        metrics.audit_events.labels(action).inc()


bp = Blueprint("metrics", __name__)


def _may_read() -> bool:
    """With METRICS_TOKEN, its bearer only; without, a client on this machine that came by
    itself: from loopback, with no forwarding header (app/domain/addresses.py), so that a proxy on
    this machine exposes nothing, whatever TRUSTED_PROXIES says."""
    token: str | None = current_app.config.get("METRICS_TOKEN")
    if token:
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            presented.strip(" \t").encode("latin-1"), token.encode("ascii")
        )
    return addresses.is_local()


@bp.get("/metrics")
def metrics() -> Response:
    """Prometheus's text format; anyone else gets the answer of an unknown path."""
    if not _may_read():
        abort(404)
    registry = current_app.extensions[EXTENSION].registry
    return Response(generate_latest(registry), content_type=TEXT_FORMAT)
