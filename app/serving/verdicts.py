"""The doors' verdicts of the current request, and the one WSGI wrapper that hands them, when
the answer starts, to what counts them: the metrics (app/serving/metrics.py) and the usage
(app/usage/counter.py).

app/access/auth.py's `checked` records each verdict here (door -> the key's id, the outcome, the
scopes it checked), a later verdict of a door replacing its earlier one: when the answer
starts, only each door's last verdict is left, and each counter reads it once. The record is
a ContextVar, set afresh by the wrapper for each request, so a verdict costs neither
flask.g nor current_app; without a counter (both features off, or a host application of the
remote extension) there is no record and a verdict costs one read of the ContextVar.

One record read once, in place of each feature keeping its own per verdict (the usage read
current_app and flask.g, built a NamedTuple and took a lock per verdict, and took back the
verdict a later one replaced): `python -m bench.instructions get forward_auth` on
2026-11-26, METRICS_ENABLED and USAGE_ENABLED both false / both true: before, GET 742.1k /
823.6k (+11.0%), forward auth 863.3k / 958.1k (+11.0%); after, GET 735.1k / 794.7k (+8.1%),
forward auth 843.3k / 891.9k (+5.8%). With PROMETHEUS_MULTIPROC_DIR set (gunicorn's case),
both on: GET 808.8k, forward auth 911.8k. cProfile puts the usage's own share (record, add)
near nothing; what is left is mostly prometheus_client's increments and histogram.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextvars import ContextVar

from flask import Flask

ALLOWED = "allowed"
EXTENSION = "verdicts"

log = logging.getLogger(__name__)

# One door's last verdict: the key's id (None: no key found), the outcome (allowed, or the
# refusal's code), the scopes (bits) the door checked and let through.
Verdict = tuple[int | None, str, int]
Verdicts = dict[str, Verdict]
# What counts a request when its answer starts: (environ, status, seconds since the request
# arrived, the doors' verdicts).
Counter = Callable[[dict, int, float, Verdicts], None]

# The current request's verdicts, door -> Verdict; None outside a counted request.
_verdicts: ContextVar[Verdicts | None] = ContextVar("api_keys_verdicts", default=None)


def record(door: str, outcome: str, key: int | None = None, scopes: int = 0) -> None:
    """`door`'s verdict on the key `key` (its id; None: the key the door found before in this
    request, if any) with, let through, the `scopes` (bits) it checked: it replaces the
    door's earlier verdict, keeping the scopes an earlier `allowed` of the same key had."""
    verdicts = _verdicts.get()
    if verdicts is None:
        return
    before = verdicts.get(door)
    if before is not None:
        if key is None:
            key = before[0]
        if scopes and before[0] == key and before[1] == outcome:
            scopes |= before[2]
    verdicts[door] = (key, outcome, scopes)


def refused(key: int, outcome: str) -> None:
    """Every door that let the key `key` through now refuses it with `outcome`."""
    verdicts = _verdicts.get()
    if verdicts:
        for door, verdict in list(verdicts.items()):
            if verdict[0] == key:
                verdicts[door] = (key, outcome, 0)


def count(app: Flask, counter: Counter) -> None:
    """`counter` called with each request of `app` when its answer starts; the wrapper is
    installed by the first counter, around app.wsgi_app as it is then."""
    counters: list[Counter] | None = app.extensions.get(EXTENSION)
    if counters is None:
        counters = app.extensions[EXTENSION] = []
        app.wsgi_app = _wrapper(app.wsgi_app, counters)  # type: ignore[method-assign]
    counters.append(counter)


def _wrapper(wsgi_app: Callable, counters: list[Counter]) -> Callable:
    """A WSGI wrapper rather than before_request and after_request hooks, which cost two
    calls of Flask's ensure_sync and reads of the request proxy."""

    def counted(environ: dict, start_response: Callable):
        started = time.perf_counter()
        verdicts: Verdicts = {}
        _verdicts.set(verdicts)

        def answer(status: str, headers: list, exc_info=None) -> Callable:
            # Flask starts the answer with its request still in the environ (it clears
            # environ["werkzeug.request"] after): the counters read it now.
            seconds = time.perf_counter() - started
            code = int(status[:3])
            for counter in counters:
                try:
                    counter(environ, code, seconds, verdicts)
                except Exception:  # a count failed, never the answer (outside Flask's handlers)
                    log.exception("a counter of the request failed; the answer is sent")
            return start_response(status, headers, exc_info)

        return wsgi_app(environ, answer)

    return counted
