"""Safe targets (docs/design.md, "Webhooks"): an endpoint's URL is https to public addresses
only, checked when it is made or changed and again before every try (a name may resolve
elsewhere by then); WEBHOOK_ALLOW_PRIVATE=true, for development and tests, lifts it."""

from __future__ import annotations

import socket

import pytest

from app.webhooks import sender, targets
from tests.webhooks import deliveries, make_endpoint

PUBLIC = "93.184.216.34"


@pytest.fixture
def dns(monkeypatch) -> dict[str, list[str]]:
    """Names this test resolves as it says; any other name does not resolve."""
    names: dict[str, list[str]] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        try:
            addresses = [str(targets.ipaddress.ip_address(host))]
        except ValueError:
            if host not in names:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
            addresses = names[host]
        return [
            (
                socket.AF_INET6 if ":" in address else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (address, port),
            )
            for address in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://127.1.2.3/hook",
        "https://[::1]/hook",
        "https://0.0.0.0/hook",
        "https://10.1.2.3/hook",
        "https://172.16.0.1/hook",
        "https://192.168.1.1/hook",
        "https://100.64.0.1/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fe80::1]/hook",
        "https://[fc00::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://[::ffff:10.0.0.1]/hook",
        "https://[::ffff:169.254.169.254]/hook",
        "https://224.0.0.1/hook",
        "https://localhost/hook",
        "https://loopback.test/hook",
        "https://mixed.test/hook",
        "https://nowhere.test/hook",
        f"http://{PUBLIC}/hook",
    ],
)
def test_a_url_that_does_not_lead_to_a_public_https_address_is_refused(client, org, dns, url):
    dns["localhost"] = ["127.0.0.1", "::1"]
    dns["loopback.test"] = ["127.0.0.1"]
    dns["mixed.test"] = [PUBLIC, "10.0.0.1"]
    response = client.post(
        "/api/webhooks", json={"url": url, "events": ["key.created"]}, auth=(org.sdk, "")
    )
    assert response.status_code == 422, response.json
    assert set(response.json["errors"]) == {"url"}
    assert client.get("/api/webhooks", auth=(org.sdk, "")).json == {"data": []}


def test_a_public_https_url_is_taken_and_changed_only_to_another(client, org, dns):
    dns["hooks.example.com"] = [PUBLIC]
    made = make_endpoint(client, org.sdk, "https://hooks.example.com/in?team=ops")
    assert made["url"] == "https://hooks.example.com/in?team=ops"
    literal = make_endpoint(client, org.sdk, f"https://{PUBLIC}:8443/hook")
    assert literal["url"] == f"https://{PUBLIC}:8443/hook"
    refused = client.put(
        f"/api/webhooks/{made['id']}", json={"url": "https://127.0.0.1/"}, auth=(org.sdk, "")
    )
    assert refused.status_code == 422
    assert set(refused.json["errors"]) == {"url"}
    read = client.get(f"/api/webhooks/{made['id']}", auth=(org.sdk, "")).json
    assert read["url"] == "https://hooks.example.com/in?team=ops"


def test_each_try_checks_the_address_again(app, client, org, dns, sql):
    dns["hooks.example.com"] = [PUBLIC]
    endpoint = make_endpoint(client, org.sdk, "https://hooks.example.com/in")
    dns["hooks.example.com"] = ["127.0.0.1"]  # the name now leads to this machine
    client.post("/api/keys", json={"name": "a", "kind": "telemetry"}, auth=(org.sdk, ""))
    assert sender.of(app).tick() == 1
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["status"] == "pending"
    assert listed["last_status"] is None
    assert listed["last_error"] == (
        "target refused: The host hooks.example.com resolves to 127.0.0.1, which is not a "
        "public address."
    )


# (address, public?): each IPv4 form judged as the IPv4 address it carries, and the ranges no
# webhook receiver lives in refused by name, whatever the Python version's ipaddress says.
ADDRESSES = [
    (PUBLIC, True),
    ("2606:2800:220:1:248:1893:25c8:1946", True),
    ("2001:4860:4860::8888", True),
    ("127.0.0.1", False),
    ("0.1.2.3", False),  # "this network", 0.0.0.0/8
    ("10.0.0.1", False),
    ("100.64.0.1", False),
    ("169.254.169.254", False),
    ("172.16.0.1", False),
    ("192.168.0.1", False),
    ("192.0.0.1", False),  # IETF protocol assignments, all of 192.0.0.0/24
    ("192.0.0.9", False),
    ("192.0.0.170", False),
    ("192.0.2.1", False),  # documentation
    ("198.51.100.1", False),
    ("203.0.113.1", False),
    ("192.88.99.1", False),  # 6to4 relays (deprecated)
    ("198.18.0.1", False),  # benchmarking
    ("224.0.0.1", False),
    ("240.0.0.1", False),
    ("255.255.255.255", False),
    ("::", False),
    ("::1", False),
    ("fe80::1%eth0", False),
    ("fc00::1", False),
    ("fec0::1", False),  # site-local (deprecated)
    ("ff02::1", False),
    ("100::1", False),  # discard-only
    ("2001::1", False),  # Teredo, in the IETF's 2001::/23
    ("2001:2::1", False),  # benchmarking
    ("2001:db8::1", False),  # documentation
    ("3fff::1", False),
    ("5f00::1", False),  # segment routing
    ("4000::1", False),  # outside global unicast (2000::/3)
    # IPv4-mapped
    (f"::ffff:{PUBLIC}", True),
    ("::ffff:127.0.0.1", False),
    ("::ffff:192.168.0.1", False),
    ("::ffff:169.254.169.254", False),
    # IPv4-compatible (deprecated)
    ("::127.0.0.1", False),
    ("::169.254.169.254", False),
    (f"::{PUBLIC}", True),
    # IPv4-translated
    ("::ffff:0:127.0.0.1", False),
    ("::ffff:0:169.254.169.254", False),
    (f"::ffff:0:{PUBLIC}", True),
    # NAT64, well-known prefix
    ("64:ff9b::7f00:1", False),
    ("64:ff9b::127.0.0.1", False),
    ("64:ff9b::a9fe:a9fe", False),
    ("64:ff9b::a00:1", False),
    (f"64:ff9b::{PUBLIC}", True),
    # NAT64, local-use prefix: never public, whatever it carries
    ("64:ff9b:1::7f00:1", False),
    ("64:ff9b:1::a9fe:a9fe", False),
    ("64:ff9b:1::5db8:d822", False),
    # 6to4
    ("2002:7f00:1::", False),
    ("2002:a9fe:a9fe::1", False),
    ("2002:c0a8:1::1", False),
    ("2002:5db8:d822::1", True),
]


@pytest.mark.parametrize(("address", "public"), ADDRESSES)
def test_what_counts_as_public(address, public):
    assert targets.is_public(address) is public


def test_what_counts_as_public_does_not_depend_on_the_python_version(monkeypatch):
    """ipaddress's verdicts (is_global, is_private...) differ from Python 3.11 to 3.13: the
    guard asks none of them."""

    def asked(self):
        raise AssertionError("the guard asked ipaddress for its verdict")

    for kind in (targets.ipaddress.IPv4Address, targets.ipaddress.IPv6Address):
        for verdict in (
            "is_global",
            "is_private",
            "is_reserved",
            "is_loopback",
            "is_link_local",
            "is_multicast",
            "is_unspecified",
        ):
            monkeypatch.setattr(kind, verdict, property(asked))
    for address, public in ADDRESSES:
        assert targets.is_public(address) is public, address


@pytest.mark.parametrize(
    ("host", "carried"),
    [
        ("[64:ff9b::7f00:1]", "127.0.0.1"),
        ("[64:ff9b::a9fe:a9fe]", "169.254.169.254"),
        ("[2002:7f00:1::]", "127.0.0.1"),
        ("[2002:a9fe:a9fe::1]", "169.254.169.254"),
        ("[::127.0.0.1]", "127.0.0.1"),
        ("[::ffff:0:a9fe:a9fe]", "169.254.169.254"),
        ("nat64.test", "169.254.169.254"),
        ("[::1]", None),
    ],
)
def test_an_ipv6_address_carrying_a_private_ipv4_one_is_refused_naming_it(
    client, org, dns, host, carried
):
    dns["nat64.test"] = ["64:ff9b::a9fe:a9fe"]
    response = client.post(
        "/api/webhooks",
        json={"url": f"https://{host}/hook", "events": ["key.created"]},
        auth=(org.sdk, ""),
    )
    assert response.status_code == 422, response.json
    (message,) = response.json["errors"]["url"]
    if carried is None:
        assert "carries" not in message
    else:
        assert f"carries {carried}" in message
    assert client.get("/api/webhooks", auth=(org.sdk, "")).json == {"data": []}


def test_private_targets_are_allowed_only_when_configured(make_app, database_url, org, dns):
    dns["localhost"] = ["127.0.0.1"]
    for allowed, status in ((True, 201), (False, 422)):
        client = make_app(
            SQLALCHEMY_DATABASE_URI=database_url,
            WEBHOOK_ALLOW_PRIVATE=allowed,
            WEBHOOK_SENDER_ENABLED=False,
        ).test_client()
        response = client.post(
            "/api/webhooks",
            json={"url": "http://localhost:8000/hook", "events": ["key.created"]},
            auth=(org.sdk, ""),
        )
        assert response.status_code == status, response.json


@pytest.fixture
def tls_receiver(tmp_path):
    """An https receiver on this machine whose certificate no authority signed."""
    import ssl
    import subprocess

    from tests.receivers import start_receiver

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    started = start_receiver()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    started.server.socket = context.wrap_socket(started.server.socket, server_side=True)
    yield started
    started.stop()


def test_an_https_target_must_show_a_certificate_that_verifies(
    make_app, database_url, org, tls_receiver
):
    app = make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        WEBHOOK_ALLOW_PRIVATE=True,
        WEBHOOK_SENDER_ENABLED=False,
    )
    client = app.test_client()
    url = tls_receiver.url.replace("http://", "https://")
    endpoint = make_endpoint(client, org.sdk, url)
    client.post("/api/keys", json={"name": "a", "kind": "telemetry"}, auth=(org.sdk, ""))
    assert sender.of(app).tick() == 1
    listed = deliveries(client, org.sdk, endpoint)["data"][0]
    assert listed["status"] == "pending"
    assert "CERTIFICATE_VERIFY_FAILED" in listed["last_error"]
