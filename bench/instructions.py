"""What one request costs in CPU instructions, in process, as `make run` configures the
service (limits on, in memory): the difference between 1,300 and 300 requests under
valgrind's cachegrind, over 1,000. Instructions do not vary from run to run as req/s do on
a shared machine, so a change of 1% shows (`apt-get install -y valgrind`).

    python -m bench.instructions bare get list forward_auth introspect unauthenticated
    BENCH_LIMITS=off python -m bench.instructions get     # the same without the limits
    python -m bench.instructions get_metered forward_auth_metered  # a key with a rate
                                                  # limit and a quota of its own
    python -m bench.instructions forward_auth_held  # the same, and an identity with both

The access log is gunicorn's, outside the application: `bench/README.md` says how it was
measured.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tempfile

from werkzeug.test import EnvironBuilder

from bench.seed import seed

FEW, MANY = 300, 1_300
UNSPENDABLE = "1000000000/minute"
# The work that comes with time, not with requests (the webhook sender's poll every second,
# the usage's batch every 10 s, a key's `last_used` every minute), held off: under valgrind
# a request takes 50 times as long, and on a busy machine longer still, so that work counted
# per request moved the figures by 10% with the machine's load.
QUIET = {
    "WEBHOOK_POLL_SECONDS": 3600.0,
    "USAGE_FLUSH_SECONDS": 3600.0,
    "LAST_USED_RESOLUTION": 3600,
}


def environ(scenario: str, seeded: dict) -> dict:
    """The WSGI environ of one request of `scenario`."""
    reader = seeded["reader"]
    for suffix in ("metered", "held"):
        if scenario.endswith("_" + suffix):
            reader, scenario = seeded[suffix], scenario.removesuffix("_" + suffix)
    basic = base64.b64encode(f"{reader}:".encode()).decode()
    headers = {"Authorization": f"Basic {basic}"}
    requests = {
        "get": ("GET", f"/api/keys/{seeded['read_target']}", None),
        "list": ("GET", "/api/keys", None),
        "forward_auth": ("GET", "/api/forward-auth?scope=monitor:read", None),
        "introspect": ("POST", "/api/introspect", {"token": seeded["reader"]}),
        "unauthenticated": ("GET", f"/api/keys/{seeded['read_target']}", None),
        "bare": ("GET", "/ping", None),
    }
    method, path, body = requests[scenario]
    if scenario in ("unauthenticated", "bare"):
        headers = {}
    builder = EnvironBuilder(
        path=path, method=method, headers=headers, json=body, environ_base={"REMOTE_ADDR": "::1"}
    )
    return builder.get_environ()


def loop(url: str, scenario: str, count: int, seeded: dict) -> None:
    """`count` requests straight into the application's WSGI callable."""
    from app import create_app
    from bench import bare

    app = (
        bare.app
        if scenario == "bare"
        else create_app(
            {
                "SQLALCHEMY_DATABASE_URI": url,
                "RATELIMIT_ENABLED": os.environ.get("BENCH_LIMITS", "on") == "on",
                "RATELIMIT_PER_KEY": UNSPENDABLE,
                "RATELIMIT_AUTH_FAILURES": UNSPENDABLE,
                "RATELIMIT_INTROSPECT": UNSPENDABLE,
                **QUIET,
            }
        )
    )
    prepared = environ(scenario, seeded)
    body = prepared.get("wsgi.input").read() if "wsgi.input" in prepared else b""

    def start_response(status, headers, exc_info=None):
        return None

    import io

    for _ in range(count):
        request = dict(prepared)
        request["wsgi.input"] = io.BytesIO(body)
        for _chunk in app(request, start_response):
            pass


def counted(url: str, scenario: str, count: int, seeded: dict) -> int:
    """The instructions of a whole process that serves `count` requests."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        "--loop",
        url,
        scenario,
        str(count),
        json.dumps(seeded),
    ]
    env = os.environ | {"PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)  # noqa: S603
    return int(re.search(r"I\s+refs:\s+([\d,]+)", done.stderr).group(1).replace(",", ""))


def main(arguments: list[str]) -> None:
    if arguments[:1] == ["--loop"]:
        url, scenario, count, seeded = arguments[1:]
        loop(url, scenario, int(count), json.loads(seeded))
        return
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as scratch:
        url = f"sqlite:///{scratch}/keys.sqlite3"
        made = seed(url, int(os.environ.get("BENCH_KEYS", "10000")))
        seeded = {
            "reader": made.reader,
            "read_target": made.read_target,
            "metered": made.metered,
            "held": made.held,
        }
        for scenario in arguments or ["get"]:
            few, many = (counted(url, scenario, n, seeded) for n in (FEW, MANY))
            print(f"{scenario}: {(many - few) / (MANY - FEW) / 1000:.1f}k instructions per request")


if __name__ == "__main__":
    main(sys.argv[1:])
