"""gunicorn's settings for the service: `gunicorn wsgi:app` reads this file from the
working directory. Command-line options override it; the environment variables below
tune it without editing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parent


def _bind(host: str, port: str) -> str:
    """gunicorn's address for `host` and `port`: an IPv6 address in brackets (`[::1]:5000`),
    which gunicorn would otherwise split at its last colon."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


# Where to listen: 127.0.0.1:5000 unless HOST and PORT say otherwise (HOST=0.0.0.0 or ::
# to serve other machines, behind a proxy that terminates TLS; HOST=::1 for IPv6 loopback).
# Unlike gunicorn without this file, PORT alone keeps the loopback address: nothing is
# exposed unless HOST says so.
bind = [_bind(os.environ.get("HOST", "127.0.0.1"), os.environ.get("PORT", "5000"))]

# Sync workers: each request is a few milliseconds of CPU and one or two indexed queries.
# WEB_CONCURRENCY sets their number; by default two per CPU, plus one.
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1) + 1))

# A worker silent for 30 s is killed and replaced; on SIGTERM, requests in flight get
# 20 s to finish (a database write waits at most 5 s for SQLite's lock).
timeout = 30
graceful_timeout = 20

# Not preloaded: each worker builds the application and opens its own database connections
# after the fork. The first start (migrations and the `default` organization) runs once,
# in the master process, before any worker: on_starting below.
preload_app = False

# No control socket: gunicorn 27 otherwise opens ~/.gunicorn/gunicorn.ctl, one path for
# every server the user runs. `gunicornc` is not needed to run the service.
control_socket_disable = True

# One access line per request on stdout, without the Basic user name (which is the key).
# The logger class masks keys whatever the format says, so that a format changed here
# cannot print one (see app/serving/gunicorn_logger.py).
accesslog = "-"
access_log_format = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'
logger_class = "app.serving.gunicorn_logger.GunicornLogger"


def on_starting(server) -> None:
    """Before any worker: the first start, as the command `flask --app app first-start`
    (app/bootstrap.py), which refuses limits counted per worker (memory:// under several
    workers), runs the migrations and makes organization `default`, so that what it loads
    (alembic, the whole application) stays out of this process: only the workers build the
    application. Its failure stops gunicorn before any worker starts."""
    # GET /metrics adds up every worker's counts (app/serving/metrics.py): prometheus_client's
    # multiprocess mode, in which each process writes its own files in this directory, a new
    # one for every start (under TMPDIR), removed on exit. Workers import prometheus_client
    # after the fork, so they all read it.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="api-keys-metrics-")
    first_start = [sys.executable, "-m", "flask", "--app", "app", "first-start"]
    first_start += ["--workers", str(server.cfg.workers)]
    if subprocess.run(first_start, cwd=PROJECT, check=False).returncode != 0:  # noqa: S603
        raise RuntimeError("the first start (migrations, organization default) failed: see above")


def post_fork(server, worker) -> None:
    """In each worker, before it serves: gunicorn's own refusals (malformed HTTP, a request
    line or headers over its limits) in the problem shape, like every other error
    (app/serving/gunicorn_errors.py)."""
    from app.serving import gunicorn_errors

    gunicorn_errors.install()


def post_worker_init(worker) -> None:
    """One line once a worker can answer: after the first-start work, before any request."""
    worker.log.info("Worker ready (pid: %s)", worker.pid)
    # Each worker delivers webhooks (app/webhooks/sender.py), whether or not requests come.
    from app.webhooks import sender

    sender.start_all()
    # Each worker records this host in the database (app/serving/hosts.py), requests or not.
    from app.serving import hosts

    hosts.start_all()


def worker_exit(server, worker) -> None:
    """A worker stopping gracefully writes the key usage it counted since its last batch
    (app/usage): only a worker killed outright loses that window."""
    from app.usage import counter as usage_counter
    from app.webhooks import sender

    usage_counter.flush_all()
    sender.stop_all()
    from app.serving import hosts

    hosts.stop_all()


def child_exit(server, worker) -> None:
    """A worker has ended, or was killed: its counts stay in its files and still add up;
    prometheus_client drops what it kept only while the worker lived (live gauges)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server) -> None:
    """The workers' metrics files go with the server."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
