"""Per-key usage under a real gunicorn (docs/design.md, "Usage"): several workers answer a
steady load of forward-auth checks of one key; one is killed with SIGKILL mid-run, then the
server stops gracefully. The usage endpoint's total then lacks at most what the killed
worker answered in its last flush window: every other worker's counts are exact.

Which worker answered which request is read from gunicorn's access log, whose format the
test sets (GUNICORN_CMD_ARGS) to the worker's pid, a sequence number the client sends as a
header, and the status."""

from __future__ import annotations

import base64
import http.client
import os
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from app import create_app
from app.extensions import db
from tests.server.test_gunicorn import sdk_key

WORKERS = 3
FLUSH_SECONDS = 0.5
CLIENTS = 4
LOAD_SECONDS = 5.0
LINE = re.compile(r"<(\d+)> (\d+) (\d{3})")


def check(port: int, key: str, number: int) -> bool:
    """One forward-auth check of `key` on a new connection (any worker may answer it),
    numbered by its X-Seq header; False when its worker died before answering."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    credentials = base64.b64encode(f"{key}:".encode()).decode()
    headers = {"Authorization": f"Basic {credentials}", "X-Seq": str(number), "Connection": "close"}
    try:
        connection.request("GET", "/api/forward-auth?scope=monitor:read", headers=headers)
        return connection.getresponse().status == 204
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def test_a_killed_worker_loses_at_most_its_last_flush_window(start_server):
    env = {
        "USAGE_FLUSH_SECONDS": str(FLUSH_SECONDS),
        "METRICS_ENABLED": "false",
        "RATELIMIT_ENABLED": "false",
        "GUNICORN_CMD_ARGS": "--access-logformat '%(p)s %({x-seq}i)s %(s)s'",
    }
    server = start_server(workers=WORKERS, env=env)
    sdk = sdk_key(server)
    made = server.request(
        "POST", "/api/keys", sdk, {"name": "load", "kind": "custom", "scopes": ["monitor:read"]}
    )
    key = made.json()["key"]
    victim = sorted(server.worker_pids())[0]

    done_at: dict[int, float] = {}
    sequence = iter(range(10**9))
    lock = threading.Lock()
    killed_at: list[float] = []
    started = time.monotonic()

    def load() -> None:
        while time.monotonic() - started < LOAD_SECONDS:
            with lock:
                number = next(sequence)
            if check(server.port, key, number):
                done_at[number] = time.monotonic()
            if not killed_at and time.monotonic() - started > LOAD_SECONDS * 0.6:
                with lock:
                    if not killed_at:
                        killed_at.append(time.monotonic())
                        os.kill(victim, signal.SIGKILL)

    first_workers = server.worker_pids() | {victim}
    with ThreadPoolExecutor(CLIENTS) as pool:
        for future in [pool.submit(load) for _ in range(CLIENTS)]:
            future.result()
    # On a loaded machine the replacement may not have served yet: more checks until it has.
    server.wait_until_ready(WORKERS + 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pids = {int(pid) for pid, _, _ in LINE.findall(server.stdout.read_text())}
        if pids - first_workers:
            break
        number = next(sequence)
        if check(server.port, key, number):
            done_at[number] = time.monotonic()
    server.stop()  # SIGTERM: every living worker writes what it counted
    assert server.process.returncode == 0

    answered: dict[int, list[int]] = {}
    for pid, number, status in LINE.findall(server.stdout.read_text()):
        if status == "204":
            answered.setdefault(int(pid), []).append(int(number))
    assert victim in answered and len(answered) > WORKERS  # the victim, and its replacement
    total = sum(len(numbers) for numbers in answered.values())
    by_victim = answered[victim]
    # What the victim answered in the flush window before its death (and a margin for a
    # batch still being written then).
    window = [n for n in by_victim if done_at.get(n, 0) > killed_at[0] - 2 * FLUSH_SECONDS]

    app = create_app({"SQLALCHEMY_DATABASE_URI": server.database, "USAGE_ENABLED": False})
    try:
        body = app.test_client().get(f"/api/keys/{key}/usage?granularity=hour", auth=(sdk, "")).json
    finally:
        with app.app_context():
            db.engine.dispose()
    counted = body["total"]["allowed"]
    lost = total - counted
    assert body["total"]["refused"] == {}
    assert 0 <= lost <= len(window), (total, counted, len(by_victim), len(window))
    assert total - len(by_victim) <= counted  # every other worker's counts are all there
