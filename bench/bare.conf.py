"""gunicorn's settings for bare Flask in `make bench`: the project's gunicorn.conf.py
(workers, timeouts, the "Worker ready" line the benchmark waits for) without its first start
(bare Flask has no database) and, unless BENCH_BARE_ACCESS_LOG=on, without the access log:
the ceiling the service is measured against."""

import os
import runpy
from pathlib import Path

_PROJECT = Path(__file__).resolve().parents[1]
globals().update(
    (name, value)
    for name, value in runpy.run_path(str(_PROJECT / "gunicorn.conf.py")).items()
    if not name.startswith("__")
)


def on_starting(server) -> None:
    """Nothing to prepare: bare Flask has no database."""


if os.environ.get("BENCH_BARE_ACCESS_LOG") != "on":
    accesslog = None
