"""Whether a found key may be used now (docs/design.md, "Key policy"): expired, disabled,
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

from app.access import limits, uses
from app.access.uses import Allowance, Exhausted, Rate
from app.domain import addresses, bindings
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
# A refusal by a limit the key shares: its maker's, or its identity's (the problem
# document's `limit` says whose); (code, whose, lifetime) -> its sentence.
BOUND_REFUSALS = {
    (RATE_LIMITED, bindings.MAKER, False): "A key that made this key has used its rate limit, "
    "which the keys it made share; retry later.",
    (RATE_LIMITED, bindings.IDENTITY, False): "This key's identity has used its rate limit, "
    "which all of its keys share; retry later.",
    (QUOTA_EXCEEDED, bindings.MAKER, False): "A key that made this key has used up its quota "
    "for this period, which the keys it made share: Retry-After says when the next period "
    "renews it.",
    (QUOTA_EXCEEDED, bindings.IDENTITY, False): "This key's identity has used up its quota for "
    "this period, which all of its keys share: Retry-After says when the next period renews "
    "it, unless its organization grants more first (POST /api/identities/<id>/quota).",
    (QUOTA_EXCEEDED, bindings.MAKER, True): "A key that made this key has used up its lifetime "
    "quota, which the keys it made share and which is never renewed: ask the owner of that "
    "key for more uses (POST /api/keys/<key>/quota).",
    (QUOTA_EXCEEDED, bindings.IDENTITY, True): "This key's identity has used up its lifetime "
    "quota, which all of its keys share and which is never renewed: ask its organization for "
    "more (POST /api/identities/<id>/quota).",
}
# The refusal of each of a key's own limits (app/access/limits.py's KeyUse): a key its holder has
# used up, which says nothing of a guess.
_SPENT = {uses.RATE: RATE_LIMITED, uses.QUOTA: QUOTA_EXCEEDED}
SPENT = frozenset(_SPENT.values())


class Verdict(NamedTuple):
    """The code of the refusal (None: the key may be used now); the refusing limit's state
    (`allowance`) and whose it was (`limit`: bindings.KEY, MAKER or IDENTITY); the state
    of every rate limit that binds the key, and of the quota with the fewest uses left;
    the quotas this use was the last of."""

    refusal: str | None
    allowance: Allowance | None = None
    quota: Allowance | None = None
    limit: str | None = None
    rates: tuple[Rate, ...] = ()
    exhausted: tuple[Exhausted, ...] = ()

    def ratelimit_headers(self) -> list[tuple[str, str]]:
        """The IETF httpapi draft's RateLimit-Policy and RateLimit fields, an item for each
        rate limit that binds the key, and the quota's Quota-Remaining and Quota-Reset
        (none for a lifetime); none without either."""
        headers = []
        if self.rates:
            policies = (f'"{r.name}";q={r.requests};w={r.seconds}' for r in self.rates)
            states = (
                f'"{r.name}";r={r.allowance.remaining};t={r.allowance.reset}' for r in self.rates
            )
            headers += [("RateLimit-Policy", ", ".join(policies)), ("RateLimit", ", ".join(states))]
        if self.quota is not None:
            headers.append(("Quota-Remaining", str(self.quota.remaining)))
            if self.quota.reset is not None:
                headers.append(("Quota-Reset", str(self.quota.reset)))
        return headers


USABLE = Verdict(None)


def verdict(
    key: Caller, address: Callable[[], str | None], is_use: bool = True, quota: bool = True
) -> Verdict:
    """Whether `key` may be used now from the client `address()` gives (asked only of a
    key with allowed_ips; None: unknown, which no allow list takes); a use under its own
    limit is spent here, and of its quotas only when the use spends `quota` (a request
    that manages keys spends only their rate limits, unless it makes one: docs/api.md).
    USABLE itself for a key that may and has no limit of its own.

    A request that `is_use` not (a message of MCP's protocol other than tools/call,
    docs/design.md, "Promises kept by default") is judged on all but the limit and the quota, which
    it neither spends nor meets: USABLE when the key may be used."""
    if key.expires_at is not None and key.expires_at <= utcnow():
        return Verdict(EXPIRED_KEY)
    if not key.enabled:
        return Verdict(DISABLED_KEY)
    if key.allowed_ips and not allowed_address(address(), tuple(key.allowed_ips)):
        return Verdict(IP_NOT_ALLOWED)
    if not is_use or (
        key.rate_limit_requests is None
        and key.quota_requests is None
        and not (key.bound_by and bindings.binds(key.bound_by))
    ):
        return USABLE
    if not quota and not bindings.rated(key):
        return USABLE  # only quotas bind it, and this use spends none
    spent = limits.spend_key(key, quota)  # the rate limits, then the quotas: all or none
    return Verdict(
        spent.refused and _SPENT[spent.refused],
        spent.refusing,
        spent.quota,
        spent.limit,
        spent.rates,
        spent.exhausted,
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
    refusing = decided.allowance
    lifetime = code == QUOTA_EXCEEDED and refusing is not None and refusing.reset is None
    if code in SPENT and refusing is not None and refusing.reset is not None:
        headers.append(("Retry-After", str(refusing.reset)))
    if decided.limit in (None, bindings.KEY):
        detail = LIFETIME_QUOTA_SPENT if lifetime else detail
        members = None if decided.limit is None else {"limit": decided.limit}
        return ApiError(status, code, detail, headers=headers, members=members)
    detail = BOUND_REFUSALS.get((code, decided.limit, lifetime), detail)
    return ApiError(status, code, detail, headers=headers, members={"limit": decided.limit})


def answer_with_headers(decided: Verdict) -> None:
    """The current request's answer (a refusal included) carries the key's RateLimit and
    Quota headers, when it has a limit or quota of its own, so that a gateway passes them on."""
    headers = decided.ratelimit_headers()
    if headers:

        @after_this_request
        def add(response: Response) -> Response:
            response.headers.extend(headers)
            return response
