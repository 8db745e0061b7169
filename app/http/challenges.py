"""What a 401 asks for: its `WWW-Authenticate` (RFC 9110 section 11.6.1), a door's scheme
and realm, and at a door that takes Bearer tokens why the token presented was refused.

RFC 6750 section 3.1, which MCP's authorization specification builds on: a 401 for a
token that was presented and refused says `error="invalid_token"`, with the 401's detail
as `error_description`; a request that presented none gets no error code. An MCP host
given a wrong key can then tell "this key is refused, and why" from "credentials are
needed". The service takes API keys, not OAuth tokens, so it publishes no protected-
resource metadata (404 at /.well-known/oauth-protected-resource): with none found, the
specification's client aborts its discovery of an authorization server (docs/mcp.md says
what hosts show)."""

from __future__ import annotations

from typing import NamedTuple

BEARER = "Bearer"
# error_description's characters (RFC 6750 section 3): printable ASCII but `"` and `\`.
_DESCRIBABLE = frozenset(chr(code) for code in range(0x20, 0x7F)) - {'"', "\\"}


class Challenge(NamedTuple):
    """A door's challenge: its scheme as a client writes it (`Basic`, `Bearer`) and realm."""

    scheme: str
    realm: str

    def header(self, refused: str | None = None) -> tuple[str, str]:
        """The 401's WWW-Authenticate. `refused`: why the key presented was refused (the
        401's detail), which a Bearer challenge carries as RFC 6750's invalid_token; None
        when none was presented. Basic has no such parameters (RFC 7617)."""
        value = f'{self.scheme} realm="{self.realm}"'
        if refused is not None and self.scheme == BEARER:
            description = "".join(c for c in refused if c in _DESCRIBABLE)
            value += f', error="invalid_token", error_description="{description}"'
        return ("WWW-Authenticate", value)
