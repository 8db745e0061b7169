"""GET /metrics under a real gunicorn (docs/design.md, "Metrics"): whichever worker answers a
scrape, it holds every worker's counts, a worker killed with SIGKILL included; promtool
finds nothing to say of a real scrape; a real Prometheus, run with the scrape
configurations docs/metrics.md shows (examples/prometheus*.yml), scrapes the service and
answers a query of its request counter. A reverse proxy on the service's machine (nginx,
Caddy) exposes nothing: a scrape through it is 404, whatever TRUSTED_PROXIES says.

The tests share a server for each of the settings they need, and count what they did
themselves in what its scrapes add up; the test that kills a worker and looks at a start's
own metrics files starts its own.

Needs Debian's `prometheus` package (/usr/bin/promtool and /usr/bin/prometheus, or
$PROMTOOL and $PROMETHEUS): apt-get install -y prometheus. The tests that need one are
skipped, saying so, without it."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.processes import PROJECT
from tests.server.conftest import REQUEST_TIMEOUT, Server, free_port, serving
from tests.server.test_docs import blocks
from tests.server.test_gateway import CADDY, NGINX, answers
from tests.server.test_gunicorn import sdk_key

PROMTOOL = Path(os.environ.get("PROMTOOL", "/usr/bin/promtool"))
PROMETHEUS = Path(os.environ.get("PROMETHEUS", "/usr/bin/prometheus"))
needs_promtool = pytest.mark.skipif(
    not os.access(PROMTOOL, os.X_OK),
    reason=f"{PROMTOOL} is missing: apt-get install -y prometheus",
)
needs_prometheus = pytest.mark.skipif(
    not os.access(PROMETHEUS, os.X_OK),
    reason=f"{PROMETHEUS} is missing: apt-get install -y prometheus",
)
WORKERS = 3
DOC = "docs/metrics.md"
# The scrape configurations docs/metrics.md shows, and the one address each names: the
# suite puts the test server's in its place, and changes nothing else.
CONFIGURATIONS = {
    "examples/prometheus.yml": "127.0.0.1:5000",
    "examples/prometheus-token.yml": "api-keys.internal:5000",
}
TOKEN = "b3J5-metrics.token_for~the+suite/=="
# The file beside the configuration that holds the token, as the token's configuration names it.
TOKEN_FILE = "api-keys-metrics-token"
# A row of the page's table of queries: | question | `query` |
QUERY = re.compile(r"^\| [^|`]+ \| `([^`]+)` \|$", re.MULTILINE)


def counts(server: Server, name: str, token: str | None = None, **labels: str) -> float:
    """One sample of a scrape of `server`, with the Bearer `token` if given (0 when the
    scrape has none)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_TIMEOUT)
    try:
        connection.request("GET", "/metrics", headers=headers)
        answer = connection.getresponse()
        body = answer.read().decode()
    finally:
        connection.close()
    assert answer.status == 200, body
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def gets(server: Server, token: str | None = None) -> float:
    labels = {"endpoint": "keys.get_key", "method": "GET", "status": "200"}
    return counts(server, "api_keys_requests_total", token, **labels)


@contextmanager
def only(server: Server, worker: int) -> Iterator[None]:
    """Every other worker stopped (SIGSTOP) meanwhile: `worker` alone accepts connections."""
    others = server.worker_pids() - {worker}
    for pid in others:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in others:
            os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[Callable[..., Server]]:
    """The module's servers, one for each number of workers and settings the tests ask
    for, started when first asked for: by default 2 workers, so that a scrape adds up both."""
    servers: dict[tuple, Server] = {}
    with ExitStack() as started:

        def server(workers: int = 2, **env: str) -> Server:
            settings = (workers, *sorted(env.items()))
            if settings not in servers:
                running = serving(tmp_path_factory, "metrics", workers, env)
                servers[settings] = started.enter_context(running)
            return servers[settings]

        yield server


@pytest.fixture
def metrics_folder(tmp_path) -> dict[str, str]:
    """gunicorn's TMPDIR, where gunicorn.conf.py makes the workers' metrics directory."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return {"TMPDIR": str(folder)}


def test_every_worker_answers_with_the_counts_of_all_and_a_killed_ones_stay(
    start_server, metrics_folder
):
    server = start_server(workers=WORKERS, env=metrics_folder)
    sdk = sdk_key(server)
    workers = sorted(server.worker_pids())
    assert len(workers) == WORKERS
    for served, worker in enumerate(workers, 1):  # 1 request by the first, 2, then 3
        with only(server, worker):
            for _ in range(served):
                assert server.request("GET", f"/api/keys/{sdk}", sdk).status == 200
    total = WORKERS * (WORKERS + 1) // 2
    for worker in workers:
        with only(server, worker):
            assert gets(server) == total
    [directory] = Path(metrics_folder["TMPDIR"]).glob("api-keys-metrics-*")
    assert {f"counter_{worker}.db" for worker in workers} <= {f.name for f in directory.iterdir()}

    victim = workers[-1]  # the one that answered 3 of the requests
    os.kill(victim, signal.SIGKILL)
    server.wait_until_ready(WORKERS + 1)  # its replacement has loaded the app
    deadline = time.monotonic() + 10
    while victim in server.worker_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    living = sorted(server.worker_pids())
    assert victim not in living and len(living) == WORKERS
    for worker in living:
        with only(server, worker):
            assert gets(server) == total
    for _ in range(WORKERS):
        assert server.request("GET", f"/api/keys/{sdk}", sdk).status == 200
    assert gets(server) == total + WORKERS
    server.stop()
    assert not directory.exists()  # each start begins from nothing


@needs_promtool
def test_promtool_finds_nothing_to_say_of_a_real_scrape(shared):
    server = shared()
    sdk = sdk_key(server)
    made = server.request("POST", "/api/keys", sdk, {"name": "m", "kind": "telemetry"})
    key = made.json()["key"]
    server.request("PUT", f"/api/keys/{key}", sdk, {"name": "n"})
    server.request("GET", "/api/forward-auth?scope=site:read", key)
    server.request("GET", "/api/keys", key)
    server.request("GET", "/no/such/path")
    server.request("DELETE", f"/api/keys/{key}", sdk)
    scraped = server.request("GET", "/metrics")
    assert scraped.status == 200
    for family in ("requests_total", "request_duration_seconds", "key_checks_total"):
        assert f"# TYPE api_keys_{family} " in scraped.body.decode()
    checked = subprocess.run(
        [str(PROMTOOL), "check", "metrics"],
        input=scraped.body,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, b"", b"")


def test_the_docs_show_each_scrape_configuration_byte_for_byte():
    shown = [block.text + "\n" for block in blocks(DOC) if block.language == "yaml"]
    files = [(PROJECT / path).read_text() for path in CONFIGURATIONS]
    assert shown == files
    for path, address in CONFIGURATIONS.items():
        assert (PROJECT / path).read_text().count(address) == 1, path


def prometheus_query(port: int, query: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return body["data"]["result"]


@needs_prometheus
@pytest.mark.parametrize("path", list(CONFIGURATIONS))
def test_a_real_prometheus_scrapes_the_service_with_the_configuration_shown(shared, tmp_path, path):
    token = path.endswith("-token.yml")
    server = shared(METRICS_TOKEN=TOKEN) if token else shared()
    if token:
        assert server.request("GET", "/metrics").status == 404  # loopback, but no token
    sdk = sdk_key(server)
    before = gets(server, TOKEN if token else None)  # what other tests got of this server
    for _ in range(3):
        assert server.request("GET", f"/api/keys/{sdk}", sdk).status == 200
    folder = tmp_path / "prometheus"
    folder.mkdir()
    configuration = (PROJECT / path).read_text()
    address = CONFIGURATIONS[path]
    (folder / "prometheus.yml").write_text(
        configuration.replace(address, f"127.0.0.1:{server.port}")
    )
    (folder / TOKEN_FILE).write_text(TOKEN + "\n")
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    prometheus = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    try:
        found: list[dict] = []
        # The first scrape comes within one scrape_interval (15 s) of the start.
        deadline = time.monotonic() + 40
        while not found and time.monotonic() < deadline:
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()
            time.sleep(0.5)
            try:
                found = prometheus_query(port, "api_keys_requests_total")
            except OSError:
                continue  # not listening yet
        assert found, (tmp_path / "prometheus.log").read_text()
        series = {
            (s["metric"]["endpoint"], s["metric"]["method"], s["metric"]["status"]): s["value"][1]
            for s in found
        }
        assert float(series[("keys.get_key", "GET", "200")]) == before + 3
        [up] = prometheus_query(port, 'up{job="api-keys"}')
        assert up["value"][1] == "1"
        queries = QUERY.findall((PROJECT / DOC).read_text())
        assert len(queries) >= 5, queries
        for query in queries:
            prometheus_query(port, query)  # each query the page suggests is one Prometheus takes
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=10)
        log.close()


@needs_promtool
@pytest.mark.parametrize("path", list(CONFIGURATIONS))
def test_promtool_accepts_the_configurations_shown(tmp_path, path):
    shutil.copy(PROJECT / path, tmp_path / "prometheus.yml")
    (tmp_path / TOKEN_FILE).write_text(TOKEN + "\n")
    checked = subprocess.run(
        [str(PROMTOOL), "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


# A reverse proxy in front of the whole service, on its machine, as an operator writes one:
# nginx with the headers its documentation suggests, Caddy's reverse_proxy as it is (it sends
# X-Forwarded-For itself).
PROXIES = {
    "nginx": """
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%(port)d;
        location / {
            proxy_pass http://127.0.0.1:%(service)d;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
    }
}
""",
    "caddy": """
{
    admin off
}
:%(port)d {
    bind 127.0.0.1
    reverse_proxy 127.0.0.1:%(service)d
}
""",
}


@contextmanager
def proxy(name: str, folder: Path, service: int) -> Iterator[int]:
    """The reverse proxy `name` in front of the service at port `service`; its port."""
    program = {"nginx": NGINX, "caddy": CADDY}[name]
    if not program.exists():
        pytest.skip(f"no {name} at {program}: apt-get install {name}")
    folder.mkdir()
    folder.chmod(0o755)  # nginx's workers, as nobody, enter it
    port = free_port()
    config = folder / "proxy.conf"
    config.write_text(PROXIES[name] % {"port": port, "service": service})
    env = dict(os.environ, HOME=str(folder), XDG_CONFIG_HOME=str(folder), XDG_DATA_HOME=str(folder))
    if name == "nginx":
        globals_ = f"daemon off; pid {folder}/nginx.pid; error_log {folder}/error.log;"
        command = [str(program), "-p", str(folder), "-c", str(config), "-g", globals_]
    else:
        command = [str(program), "run", "--adapter", "caddyfile", "--config", str(config)]
    with (folder / "output.txt").open("wb") as output:
        process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=output
        )
    try:
        deadline = time.monotonic() + 10
        while not answers(port):
            assert process.poll() is None, (folder / "output.txt").read_text()
            assert time.monotonic() < deadline, f"{name} did not start"
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def scrape(port: int, source: str = "127.0.0.1", path: str = "/metrics") -> int:
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=REQUEST_TIMEOUT, source_address=(source, 0)
    )
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize("trusted", [None, "1"])
@pytest.mark.parametrize("name", sorted(PROXIES))
def test_a_proxy_on_the_services_machine_exposes_no_metrics(shared, tmp_path, name, trusted):
    """Without METRICS_TOKEN: the service's own machine reads /metrics directly; through a
    proxy there, a client (here from 127.0.0.2, any client) gets 404, whether
    TRUSTED_PROXIES is unset (every request seems to come from the proxy's 127.0.0.1) or
    set (the proxy forwards a loopback client)."""
    # The other tests' server; for TRUSTED_PROXIES, one worker, the cheapest to start.
    server = shared() if trusted is None else shared(1, TRUSTED_PROXIES=trusted)
    assert scrape(server.port) == 200
    with proxy(name, tmp_path / name, server.port) as port:
        assert scrape(port, source="127.0.0.2") == 404
        assert scrape(port) == 404
        assert scrape(port, path="/healthz") == 200  # the proxy passes the rest
