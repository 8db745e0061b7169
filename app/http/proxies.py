"""Which forwarded headers to believe (TRUSTED_PROXIES): the client's address and scheme a
proxy forwards (X-Forwarded-For, X-Forwarded-Proto), through werkzeug's ProxyFix.

Given the proxies' addresses and networks, a request is taken as forwarded only when its
peer (the connection's address) is one of them; then X-Forwarded-For is read from its
right end, past every address that is itself a listed proxy, and the first that is not
names the client (what a client wrote further left is not believed). A client that
reaches the service directly is its own peer, whatever headers it sends, so a gateway and
direct clients may share one service. Given a number, that many hops are believed from any
peer, as before addresses were taken: only safe when nothing but the proxies can reach the
service.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.middleware.proxy_fix import ProxyFix

from app.domain import addresses

# The longest chain of listed proxies followed: a header longer than that is cut there.
MAX_HOPS = 16

Wsgi = Callable[[dict, Callable], Iterable[bytes]]


class TrustedProxies:
    """ProxyFix with as many hops as the request came through listed proxies: none for a
    peer that is not listed."""

    def __init__(self, app: Wsgi, networks: tuple[addresses.Network, ...]) -> None:
        self.app = app
        self.networks = networks
        self.fixes = [ProxyFix(app, x_for=hops, x_proto=hops) for hops in range(1, MAX_HOPS + 1)]

    def listed(self, text: str | None, zone: bool = False) -> bool:
        address = addresses.parsed(text.strip() if text else None, zone=zone)
        return address is not None and any(address in network for network in self.networks)

    def hops(self, environ: dict[str, Any]) -> int:
        """How many X-Forwarded-For entries, from the right, the listed proxies answer for:
        up to and including the first that is not one of them (0: not forwarded by one)."""
        if not self.listed(environ.get("REMOTE_ADDR"), zone=True):
            return 0
        forwarded = environ.get("HTTP_X_FORWARDED_FOR", "").split(",")
        if not forwarded[-1].strip():
            return 0
        hops = 0
        for entry in reversed(forwarded[-MAX_HOPS:]):
            hops += 1
            if not self.listed(entry):
                break
        return hops

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        hops = self.hops(environ)
        if hops == 0:
            return self.app(environ, start_response)
        return self.fixes[hops - 1](environ, start_response)


def install(app: Any, trusted: int | tuple[addresses.Network, ...]) -> None:
    """Wrap `app`'s WSGI callable as TRUSTED_PROXIES says (0 or nothing: headers ignored)."""
    if isinstance(trusted, tuple):
        if trusted:
            app.wsgi_app = TrustedProxies(app.wsgi_app, trusted)
    elif trusted:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=trusted, x_proto=trusted)
