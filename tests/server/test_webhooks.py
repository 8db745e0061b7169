"""Webhooks delivered by the workers of a real gunicorn (docs/design.md, "Webhooks"): a worker
killed with SIGKILL mid-delivery and a restart of the whole service lose no event, and under
load (a few hundred changes while the receiver fails for a while) every event arrives, each
verified by the official Standard Webhooks library; the figures are printed."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from standardwebhooks import Webhook

from tests.processes import GUNICORN, PROJECT
from tests.receivers import start_receiver
from tests.server.conftest import Server, free_port
from tests.server.test_gunicorn import sdk_key

WEBHOOK_ENV = {
    "WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver listens on this machine
    "WEBHOOK_POLL_SECONDS": "0.2",
    "RATELIMIT_ENABLED": "false",
    "METRICS_ENABLED": "false",
}


def endpoint(server: Server, sdk: str, url: str) -> dict:
    made = server.request("POST", "/api/webhooks", sdk, {"url": url, "events": ["key.created"]})
    assert made.status == 201, made.body
    return made.json()


def make_key(server: Server, sdk: str, name: str) -> None:
    made = server.request("POST", "/api/keys", sdk, {"name": name, "kind": "telemetry"})
    assert made.status == 201, made.body


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def restart(server: Server, run) -> Server:
    """Stop the service gracefully, then start it again on the same database."""
    server.stop()
    run.mkdir()
    port = free_port()
    stdout, stderr = run / "stdout.txt", run / "stderr.txt"
    command = [*GUNICORN, "--workers", str(server.workers)]
    command += ["--bind", f"127.0.0.1:{port}", "--graceful-timeout", "5", "wsgi:app"]
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            command, cwd=PROJECT, env=server.env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
    again = Server(process, port, server.database, server.env, stdout, stderr, server.workers)
    again.wait_until_ready(server.workers)
    return again


def states(server: Server) -> collections.Counter:
    return collections.Counter(
        status for (status,) in server.query("SELECT status FROM webhook_deliveries")
    )


def test_a_worker_killed_mid_delivery_loses_nothing(start_server):
    receiver = start_receiver()
    arrived = threading.Event()
    release = threading.Event()
    first = [True]

    def answer(request):
        if first[0]:
            first[0] = False
            arrived.set()
            release.wait(10)  # held until its sender has been killed
        return 204, {}

    receiver.answer = answer
    try:
        server = start_server(workers=1, env={**WEBHOOK_ENV, "WEBHOOK_LEASE_SECONDS": "6"})
        sdk = sdk_key(server)
        made = endpoint(server, sdk, receiver.url)
        make_key(server, sdk, "one")
        assert arrived.wait(10), "the event was not sent"
        (worker,) = server.worker_pids()
        os.kill(worker, signal.SIGKILL)
        release.set()
        # gunicorn starts another worker, whose sender takes the try over after its lease.
        got = receiver.wait_for(2, timeout=30)
        assert got[0].headers["webhook-id"] == got[1].headers["webhook-id"]
        payload = Webhook(made["secret"]).verify(got[1].body, got[1].headers)
        assert payload["data"]["key"]["name"] == "one"
        wait_until(lambda: states(server) == {"delivered": 1}, 10, "delivered")
        ((tries,),) = server.query("SELECT tries FROM webhook_deliveries")
        assert tries == 2
        assert worker not in server.worker_pids()
    finally:
        release.set()
        receiver.stop()


def test_a_restart_of_the_service_loses_nothing(start_server, tmp_path):
    receiver = start_receiver()
    receiver.answer = lambda request: (503, {})
    env = {**WEBHOOK_ENV, "WEBHOOK_RETRY_DELAYS": "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"}
    server = start_server(workers=2, env=env)
    again = None
    try:
        sdk = sdk_key(server)
        made = endpoint(server, sdk, receiver.url)
        for number in range(20):
            make_key(server, sdk, f"k{number}")
        wait_until(lambda: len(receiver.received) >= 20, 20, "first tries")
        again = restart(server, tmp_path / "again")
        receiver.answer = lambda request: (204, {})
        wait_until(lambda: states(again) == {"delivered": 20}, 30, "all delivered")
        ok = [r for r in receiver.received if r.headers["webhook-id"]]
        names = {
            Webhook(made["secret"]).verify(r.body, r.headers)["data"]["key"]["name"] for r in ok
        }
        assert names == {f"k{number}" for number in range(20)}
    finally:
        if again is not None:
            again.stop()
        receiver.stop()


def test_under_load_while_the_receiver_fails_every_event_arrives(start_server):
    """A few hundred changes from 4 clients on 3 workers while the receiver answers 503 for
    its first 5 seconds. Printed: events written, tries sent, requests received, events
    accepted (answered 2xx), and events accepted more than once."""
    events = 300
    env = {**WEBHOOK_ENV, "WEBHOOK_RETRY_DELAYS": "0.5,1,2,4,4,4,4,4,4,4,4,4"}
    server = start_server(workers=3, env=env)
    receiver = start_receiver()
    accepted: collections.Counter[str] = collections.Counter()
    try:
        sdk = sdk_key(server)
        made = endpoint(server, sdk, receiver.url)
        failing_until = time.monotonic() + 5.0

        def answer(request):
            if time.monotonic() < failing_until:
                return 503, {}
            accepted[request.headers["webhook-id"]] += 1
            return 204, {}

        receiver.answer = answer
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda n: make_key(server, sdk, f"k{n}"), range(events)))
        refused_while_failing = len(receiver.received)
        wait_until(lambda: states(server) == {"delivered": events}, 120, "all delivered")
        ((sent,),) = server.query("SELECT sum(tries) FROM webhook_deliveries")
        hook = Webhook(made["secret"])
        names = {
            hook.verify(request.body, request.headers)["data"]["key"]["name"]
            for request in receiver.received
        }
        assert names == {f"k{n}" for n in range(events)}
        assert len(accepted) == events
        assert sent == len(receiver.received)
        assert refused_while_failing > 0, "the receiver never failed: the test proves nothing"
        print(
            f"\nwebhooks under load: {events} events written, {sent} tries sent, "
            f"{len(receiver.received)} requests received ({sent - sum(accepted.values())} "
            f"answered 503), {len(accepted)} events accepted, "
            f"{sum(1 for count in accepted.values() if count > 1)} accepted more than once"
        )
    finally:
        receiver.stop()
