"""Where a webhook may be sent (docs/design.md, "Webhooks"): an `https` URL whose host resolves
to public addresses only, checked when an endpoint is made or changed and again before
every try (a name's addresses may change), and the try sent to the address that was
checked, so that a second resolution cannot swap in another. Redirects are never followed
(http.client follows none), and a try ends 5 s after it began, whatever the peer does.
WEBHOOK_ALLOW_PRIVATE=true lifts the address rule and allows `http`: for development and
tests, whose receivers listen on this machine; a refusal it would lift names it.

A path or query with non-ASCII characters is percent-encoded (UTF-8), as browsers send it:
the URL is stored and requested so. A URL that could never be requested (a lone surrogate,
port 0) is refused."""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

TIMEOUT = 5.0
MAX_URL_LENGTH = 2048
DEFAULT_PORTS = {"https": 443, "http": 80}


# Said of a refusal that WEBHOOK_ALLOW_PRIVATE=true would lift.
ALLOW_PRIVATE_HINT = (
    "For development and tests, the service may be started with WEBHOOK_ALLOW_PRIVATE=true "
    "(never in production)."
)
ALLOW_PRIVATE_WARNING = (
    "WEBHOOK_ALLOW_PRIVATE is true: webhooks may go to http URLs and to private, loopback and "
    "link-local addresses, so any sdk_integration key can make the service call the hosts of "
    "its own network. For development and tests only, never in production."
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_NON_ASCII = re.compile("[^\x00-\x7f]+")
# The scheme and authority of a URL, and what follows them (path, query, fragment).
_AUTHORITY = re.compile(r"([^:/?#]*://[^/?#]*)(.*)", re.DOTALL)


class UnsafeTarget(ValueError):
    """A URL a webhook may not be sent to; its message says why, for the person who gave it.
    `private`: WEBHOOK_ALLOW_PRIVATE=true would allow it."""

    def __init__(self, message: str, private: bool = False) -> None:
        super().__init__(message)
        self.private = private


class NoAnswerInTime(TimeoutError):
    """A try cut at its deadline (or whose socket timed out): the receiver was too slow, not
    gone."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (`address`, a checked IP) and what to ask for."""

    scheme: str
    host: str
    port: int
    path: str
    address: str


def _networks(*ranges: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(network) for network in ranges)


# Where no webhook receiver lives, named rather than asked of ipaddress (whose is_global
# differs from Python 3.11 to 3.13): IANA's special-purpose addresses that are not globally
# reachable, and the rest of what is no unicast host of the internet.
_NOT_PUBLIC_IPV4 = _networks(
    "0.0.0.0/8",  # this network
    "10.0.0.0/8",  # private
    "100.64.0.0/10",  # shared (carrier-grade NAT)
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local, where clouds serve their metadata (169.254.169.254)
    "172.16.0.0/12",  # private
    "192.0.0.0/24",  # IETF protocol assignments
    "192.0.2.0/24",  # documentation
    "192.88.99.0/24",  # 6to4 relays (deprecated)
    "192.168.0.0/16",  # private
    "198.18.0.0/15",  # benchmarking
    "198.51.100.0/24",  # documentation
    "203.0.113.0/24",  # documentation
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, and the broadcast address
)
# IPv6's global unicast: outside it are loopback, unspecified, unique local, link-local,
# site-local (fec0::/10), multicast, discard-only (100::/64), segment routing (5f00::/16)
# and the local-use NAT64 prefix (64:ff9b:1::/48), whatever IPv4 address it carries.
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_NOT_PUBLIC_IPV6 = _networks(
    "2001::/23",  # IETF protocol assignments: Teredo, benchmarking, ORCHID...
    "2001:db8::/32",  # documentation
    "3fff::/20",  # documentation
)
# The IPv6 forms that carry an IPv4 address in their last 32 bits: IPv4-mapped,
# IPv4-compatible (deprecated), IPv4-translated, and NAT64's well-known prefix.
_CARRYING = _networks("::ffff:0:0/96", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")  # the IPv4 address in bits 16 to 47


def carried(address: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (see _CARRYING, and 6to4), if any."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if int(ip) <= 1:  # the unspecified and loopback addresses (::, ::1) carry none
        return None
    if any(ip in network for network in _CARRYING):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour if ip in _SIX_TO_FOUR else None


def is_public(address: str) -> bool:
    """Whether an IP address belongs to the public internet: not loopback, private,
    link-local, shared, reserved, documentation, multicast or unspecified (the tables
    above). An IPv6 address that carries an IPv4 one (IPv4-mapped, -compatible or
    -translated, NAT64, 6to4) is judged as the IPv4 address it carries."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        inner = carried(address)
        if inner is None:
            return ip in _GLOBAL_UNICAST and not any(ip in n for n in _NOT_PUBLIC_IPV6)
        ip = inner
    return not any(ip in network for network in _NOT_PUBLIC_IPV4)


def normalized(url: str) -> str:
    """The URL with each non-ASCII character after its host percent-encoded (UTF-8), as
    browsers send it; its host as given (resolved by its IDNA name). No lone surrogate
    (parse refuses them)."""
    found = _AUTHORITY.fullmatch(url)
    if found is None:
        return url
    head, rest = found.groups()
    return head + _NON_ASCII.sub(lambda text: quote(text.group(), safe=""), rest)


def parse(url: str, allow_private: bool = False) -> tuple[str, str, int, str]:
    """The scheme, host, port and path (with its query, percent-encoded) of a URL a webhook
    may go to, before any resolution: UnsafeTarget when it is not one."""
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeTarget(f"Must be at most {MAX_URL_LENGTH} characters.")
    if any(ord(character) <= 32 or ord(character) == 127 for character in url):
        raise UnsafeTarget("Must not contain white space or control characters.")
    if _SURROGATE.search(url):
        raise UnsafeTarget("Must be text: a lone surrogate (\\ud800 to \\udfff) is not.")
    url = normalized(url)
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeTarget(
            f"Must be at most {MAX_URL_LENGTH} characters, its non-ASCII characters "
            "percent-encoded (3 to 12 characters each)."
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeTarget("Not a valid URL.") from None
    if parts.scheme == "http" and not allow_private:
        raise UnsafeTarget("Must be an https URL.", private=True)
    if parts.scheme not in ("https", "http"):
        raise UnsafeTarget("Must be an https URL.")
    if not parts.hostname:
        raise UnsafeTarget("Must name a host.")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTarget("Must not carry a user name or password.")
    if parts.fragment:
        raise UnsafeTarget("Must not carry a fragment (#...).")
    if port == 0:
        raise UnsafeTarget("The port must be from 1 to 65535: nothing listens on port 0.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme], path


def check(url: str, allow_private: bool = False) -> Target:
    """The URL resolved and checked: every address its host resolves to must be public
    (unless `allow_private`); UnsafeTarget otherwise, or when it does not resolve."""
    scheme, host, port, path = parse(url, allow_private)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise UnsafeTarget(f"The host {host} does not resolve to an address.") from None
    addresses = list(dict.fromkeys(str(entry[4][0]) for entry in found))
    if not addresses:  # pragma: no cover - getaddrinfo raises rather than find nothing
        raise UnsafeTarget(f"The host {host} does not resolve to an address.")
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                inner = carried(address)
                carrying = "" if inner is None else f" (it carries {inner})"
                raise UnsafeTarget(
                    f"The host {host} resolves to {address}{carrying}, which is not a public "
                    "address.",
                    private=True,
                )
    return Target(scheme, host, port, path, addresses[0])


class _Pinned(http.client.HTTPConnection):
    """A connection to the checked address, whatever the host's name resolves to now."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.target = target

    def connect(self) -> None:
        self.sock = socket.create_connection((self.target.address, self.port), self.timeout)


class _PinnedTLS(_Pinned):
    """The same over TLS, the certificate checked against the host's name."""

    def connect(self) -> None:
        super().connect()
        context = ssl.create_default_context()
        self.sock = context.wrap_socket(self.sock, server_hostname=self.target.host)


def _cut(connection: http.client.HTTPConnection, deadline: threading.Event) -> None:
    """End a try at its deadline: a shutdown wakes a read blocked in another thread (a
    close would not); `deadline` says the try ended so, whatever error the read then
    raises (to http.client, the peer closed the connection)."""
    deadline.set()
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed by its peer
            sock.shutdown(socket.SHUT_RDWR)


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float = TIMEOUT) -> int:
    """POST `body` to the checked target; its status code. The body of the answer is not
    read (nothing in it matters), and the connection is cut `timeout` seconds after it
    began, however slowly the peer sends. NoAnswerInTime when it was cut so, or timed
    out; OSError (http.client's errors included) when there is no answer otherwise."""
    connection = (_PinnedTLS if target.scheme == "https" else _Pinned)(target, timeout)
    deadline = threading.Event()
    timer = threading.Timer(timeout, _cut, (connection, deadline))
    timer.daemon = True
    timer.start()
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        return connection.getresponse().status
    except (OSError, http.client.HTTPException, AttributeError, ValueError) as error:
        if deadline.is_set() or isinstance(error, TimeoutError):
            raise NoAnswerInTime(f"no answer within {timeout:g} s") from None
        if isinstance(error, OSError):  # refused, reset, a certificate that does not verify
            raise
        # Not HTTP: http.client's errors.
        raise OSError(type(error).__name__) from None
    finally:
        timer.cancel()
        connection.close()
