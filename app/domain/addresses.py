"""A request's client address, judged in one place (docs/design.md, "Promises kept by default") for
the abuse limits, a key's `allowed_ips`, the audit log and `/metrics`; and the one normal form of an
address or network, for the client's and for `allowed_ips` alike.

An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as a dual-stack socket shows an IPv4
client) is its IPv4 address, and a network of them (`::ffff:10.0.0.0/104`) its IPv4
network (`10.0.0.0/8`): so that a key allowed `10.0.0.0/8` is allowed a client a dual-stack
socket shows as `::ffff:10.0.0.1`, and a key allowed `::ffff:10.0.0.1` is allowed the
client `10.0.0.1`.
"""

from __future__ import annotations

import ipaddress

from flask import request

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# The headers by which a proxy says whom it forwards a request for: a request that carries
# any of them came through a proxy, so it is not local, whatever TRUSTED_PROXIES says.
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")
# The longest IP address in text: an IPv6 address with an IPv4 tail.
_LONGEST_ADDRESS = len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")
# ::ffff:0:0/96, where IPv6 writes the IPv4 addresses; how a socket writes one of them.
_MAPPED_PREFIX = 96
_MAPPED_TEXT = "::ffff:"
_IPV4_BITS = 32


def parsed(text: str | None, zone: bool = False) -> Address | None:
    """`text` as an IP address in its normal form; None when it is none. An IPv6 zone
    (`fe80::1%eth0`) is dropped when `zone` allows one (the connection's own address, which
    the socket writes), else `text` is no address (a forwarded value: `::1%lo` is made up)."""
    if not text or len(text) > _LONGEST_ADDRESS + (64 if zone else 0):
        return None
    if "%" in text:
        if not zone:
            return None
        text = text.partition("%")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def network(text: str, strict: bool = True) -> Network:
    """`text` as an IP network in its normal form (ipaddress.ip_network's rules and errors;
    a network of IPv4-mapped addresses as its IPv4 network)."""
    found = ipaddress.ip_network(text, strict=strict)
    if (
        isinstance(found, ipaddress.IPv6Network)
        and found.prefixlen >= _MAPPED_PREFIX
        and found.network_address.ipv4_mapped is not None
    ):
        mapped = int(found.network_address) & (2**_IPV4_BITS - 1)
        return ipaddress.IPv4Network((mapped, found.prefixlen - _MAPPED_PREFIX))
    return found


def client_address() -> str:
    """The client's address, as the abuse limits count it, `allowed_ips` judges it, the
    audit log records it and /metrics asks whether it is local: the one the trusted hop
    forwards (werkzeug's ProxyFix, behind TRUSTED_PROXIES) when it is an IP address, else
    the connection's; in its normal form. A made-up value must not escape its count or
    reach the log."""
    original = request.environ.get("werkzeug.proxy_fix.orig")
    if original is not None:
        forwarded = parsed(request.remote_addr)
        if forwarded is not None:
            return str(forwarded)
        connection = original.get("REMOTE_ADDR")
    else:
        connection = request.remote_addr
        if connection and "%" not in connection and not connection.startswith(_MAPPED_TEXT):
            # As the socket writes it (inet_ntop): its normal form already, no parsing.
            return connection
    own = parsed(connection, zone=True)
    return (connection or "-") if own is None else str(own)


def forwarded() -> bool:
    """Whether the request names a client for a proxy (any of FORWARDING_HEADERS)."""
    headers = request.headers
    return any(name in headers for name in FORWARDING_HEADERS)


def is_local() -> bool:
    """Whether the request reached the service from this machine by itself: from a loopback
    address, and carrying no forwarding header (a proxy on this machine forwarding someone
    else's request is not local, whether TRUSTED_PROXIES is set or not)."""
    if forwarded():
        return False
    address = parsed(client_address())
    return address is not None and address.is_loopback
