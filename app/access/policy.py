"""Whether a found key may be used now (CONTRACT.md sections 15 and 21): expired, disabled,
address, its own rate limit, its quota, judged here in that order and nowhere else. Every
door asks verdict(): authentication (the REST API, /mcp, forward auth, the embedded
extension) through app/access/auth.py, and introspection for the key it checks; then each door
checks its scopes.

A key without policy costs two comparisons: its limit and quota are counted (where the
abuse limits count, every door together) only when it has them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

from flask import Response, after_this_request

from app.access import limits
from app.access.limits import Allowance
from app.domain import addresses
from app.domain.credentials import Caller
from app.domain.timestamps import utcnow
from app.http.challenges import Challenge
from app.http.errors import ApiError

EXPIRED_KEY = "expired_key"
DISABLED_KEY = "disabled_key"
IP_NOT_ALLOWED = "ip_not_allowed"
RATE_LIMITED = "rate_limited"
QUOTA_EXCEEDED = "quota_exceeded"
# The holder already has the key, so saying why it is refused leaks nothing.
REFUSALS = {
    EXPIRED_KEY: (401, "This API key has expired: it authenticates nothing any more."),
    DISABLED_KEY: (401, "This API key is disabled: it authenticates nothing until enabled."),
    IP_NOT_ALLOWED: (403, "This API key may not be used from this address."),
    RATE_LIMITED: (429, "This API key has used its own rate limit; retry later."),
    QUOTA_EXCEEDED: (
        429,
        "This API key has used up its quota for this period: Retry-After says when the next "
        "period renews it.",
    ),
}
# A lifetime quota has no next period (and its 429 no Retry-After): only a grant gives more.
LIFETIME_QUOTA_SPENT = (
    "This API key has used up its lifetime quota, which is never renewed: ask the key's owner "
    "for more uses (POST /api/keys/<key>/quota)."
)
# The refusal of each of a key's own limits (app/access/limits.py's KeyUse): a key its holder has
# used up, which says nothing of a guess.
_SPENT = {limits.RATE: RATE_LIMITED, limits.QUOTA: QUOTA_EXCEEDED}
SPENT = frozenset(_SPENT.values())
# The name of a key's own limit in the RateLimit headers.
POLICY_NAME = '"key"'


class Verdict(NamedTuple):
    """The code of the refusal (None: the key may be used now), and the state of the key's
    own limit and of its quota when it has them."""

    refusal: str | None
    allowance: Allowance | None = None
    requests: int = 0
    seconds: int = 0
    quota: Allowance | None = None

    def ratelimit_headers(self) -> list[tuple[str, str]]:
        """The IETF httpapi draft's RateLimit-Policy and RateLimit fields, and the quota's
        Quota-Remaining and Quota-Reset (none for a lifetime); none without either."""
        headers = []
        if (left := self.allowance) is not None:
            headers += [
                ("RateLimit-Policy", f"{POLICY_NAME};q={self.requests};w={self.seconds}"),
                ("RateLimit", f"{POLICY_NAME};r={left.remaining};t={left.reset}"),
            ]
        if self.quota is not None:
            headers.append(("Quota-Remaining", str(self.quota.remaining)))
            if self.quota.reset is not None:
                headers.append(("Quota-Reset", str(self.quota.reset)))
        return headers


USABLE = Verdict(None)


def verdict(key: Caller, address: Callable[[], str | None], is_use: bool = True) -> Verdict:
    """Whether `key` may be used now from the client `address()` gives (asked only of a
    key with allowed_ips; None: unknown, which no allow list takes); a use under its own
    limit is spent here. USABLE itself for a key that may and has no limit of its own.

    A request that `is_use` not (a message of MCP's protocol other than tools/call,
    CONTRACT.md section 20) is judged on all but the limit and the quota, which it neither
    spends nor meets: USABLE when the key may be used."""
    if key.expires_at is not None and key.expires_at <= utcnow():
        return Verdict(EXPIRED_KEY)
    if not key.enabled:
        return Verdict(DISABLED_KEY)
    if key.allowed_ips and not allowed_address(address(), tuple(key.allowed_ips)):
        return Verdict(IP_NOT_ALLOWED)
    if not is_use or (key.rate_limit_requests is None and key.quota_requests is None):
        return USABLE
    spent = limits.spend_key(key)  # the rate limit, then the quota: both or neither
    return Verdict(
        spent.refused and _SPENT[spent.refused],
        spent.rate,
        key.rate_limit_requests or 0,
        key.rate_limit_seconds or 0,
        spent.quota,
    )


def allowed_address(address: str | None, networks: Sequence[str]) -> bool:
    """Whether `address` lies in one of `networks`, both in their normal form
    (app/domain/addresses.py: an IPv4-mapped address or network is the IPv4 one, whether a
    dual-stack socket shows the client so or a key stored before that rule lists it so)."""
    ip = addresses.parsed(address)
    if ip is None:
        return False
    return any(ip in network for network in _networks(tuple(networks)))


@functools.lru_cache(maxsize=1024)
def _networks(entries: tuple[str, ...]) -> tuple[addresses.Network, ...]:
    return tuple(map(addresses.network, entries))


def refusal(decided: Verdict, challenge: Challenge) -> ApiError:
    """The error a door answers for a refused verdict: 401 with `challenge` (saying why the
    key presented is refused), 403, or 429 with Retry-After."""
    code = decided.refusal or RATE_LIMITED  # only a refused verdict is answered so
    status, detail = REFUSALS[code]
    headers = [challenge.header(detail)] if status == 401 else []
    if decided.allowance is not None and code == RATE_LIMITED:
        headers.append(("Retry-After", str(decided.allowance.reset)))
    if decided.quota is not None and code == QUOTA_EXCEEDED:
        if decided.quota.reset is None:  # a lifetime quota
            detail = LIFETIME_QUOTA_SPENT
        else:
            headers.append(("Retry-After", str(decided.quota.reset)))
    return ApiError(status, code, detail, headers=headers)


def answer_with_headers(decided: Verdict) -> None:
    """The current request's answer (a refusal included) carries the key's RateLimit and
    Quota headers, when it has a limit or quota of its own, so that a gateway passes them on."""
    headers = decided.ratelimit_headers()
    if headers:

        @after_this_request
        def add(response: Response) -> Response:
            response.headers.extend(headers)
            return response
