"""Authentication: the presented key -> its digest -> one indexed lookup -> its policy's
verdict (app/access/policy.py) -> the caller, behind the abuse limits; `last_used` recorded.
Every endpoint that takes a key calls authenticate(); the keys blueprint's hook adds the
managing-kind rule."""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, current_app, g, request
from sqlalchemy import bindparam, update

from app.access import limits, policy, seen
from app.domain import addresses, credentials, keyformat
from app.domain.credentials import Caller
from app.domain.scopes import MANAGING_KINDS, exceeding, to_names
from app.domain.timestamps import seconds_since, utcnow
from app.extensions import db
from app.http.challenges import Challenge
from app.http.errors import ApiError
from app.serving import verdicts
from app.storage.models import ApiKey
from app.storage.queries import Holder

CHALLENGE = Challenge("Basic", "api")
UNAUTHORIZED = "unauthorized"

# The doors a key is checked at, as app/serving/metrics.py counts their verdicts.
REST = "rest"
MCP = "mcp"
FORWARD_AUTH = "forward_auth"
INTROSPECTION = "introspection"
EXTENSION = "extension"

# How a key may be presented, as a 401 says it.
WAYS = {
    credentials.BASIC: "as the user name of HTTP Basic authentication",
    credentials.BEARER: "as a Bearer token",
}


# Why what a request presented in one of a door's schemes is no key here, as its 401 says
# it: the same words whatever was sent, so that no answer repeats any of it.
NOT_A_WHOLE_KEY = (
    "What was presented is not a whole API key (its length, characters or checksum are "
    "wrong): check it for a typo or a missing part."
)
SHOWN_FORM = (
    "What was presented is a key's shown form (<identifier>...), not the key itself: the "
    "full key was shown once, when the key was created."
)
NO_SUCH_KEY = "No such API key: it may have been deleted, revoked or rotated."


def unauthorized(
    challenge: Challenge = CHALLENGE,
    schemes: tuple[str, ...] = (credentials.BASIC, credentials.BEARER),
    presented: bool = False,
    why: str | None = None,
) -> ApiError:
    """401: no valid key in one of `schemes`; `presented`: the request presented one in
    them, which the challenge says was refused (app/http/challenges.py), for `why` (one of
    the sentences above; None: that a valid key is required)."""
    ways = " or ".join(WAYS[scheme] for scheme in schemes)
    detail = why or f"A valid API key is required, {ways}."
    header = challenge.header(detail if presented else None)
    return ApiError(401, UNAUTHORIZED, detail, headers=[header])


def unrecognised(
    header: str | None,
    challenge: Challenge = CHALLENGE,
    schemes: tuple[str, ...] = (credentials.BASIC, credentials.BEARER),
    well_formed: bool = False,
) -> ApiError:
    """The 401 of a request whose Authorization `header` holds no key found here: that a
    key is required, when none is presented in one of `schemes`; else why what it presents
    is none: a `well_formed` key (shape and checksum) that no organization holds (here), a
    key's shown form, or anything else. Only a well-formed key asked the database; the
    abuse limits count each as the same failed authentication."""
    if credentials.scheme_of(header) not in schemes:
        return unauthorized(challenge, schemes)
    if well_formed:
        why = NO_SUCH_KEY
    else:
        offer = credentials.offered(header)
        shown = offer is not None and keyformat.is_shown_form(offer.key)
        why = SHOWN_FORM if shown else NOT_A_WHOLE_KEY
    return unauthorized(challenge, schemes, presented=True, why=why)


def checked(door: str, outcome: str, key: int | None = None, scopes: int = 0) -> None:
    """`door`'s verdict on the request's key (`outcome`: allowed, or the refusal's code), the
    one call that counts it: in the metrics, and in the usage of the key `key` (its id: the
    key the door has just found; None: the one it found before) with, let through, the
    `scopes` (bits) it checked."""
    verdicts.record(door, outcome, key, scopes)


def refused(door: str, refusal: ApiError) -> ApiError:
    """`refusal` of the request's key at `door`, counted as the door's verdict (its code)."""
    checked(door, refusal.problem_code)
    return refusal


# Named by identifier, as every write of a key is (app/keys/service.py says why).
_RECORD_USE = (
    update(ApiKey)
    .where(ApiKey.identifier == bindparam("key"))
    .values(last_used=bindparam("now"))
    .execution_options(**{seen.UNSEEN: True})
)


def record_use(holder: Holder) -> None:
    """A key was used now: written on its first use, then at most once per
    LAST_USED_RESOLUTION seconds, so that reads do not become writes. No check decides from
    it: the rows seen keep theirs (app/access/seen.py)."""
    resolution = current_app.config["LAST_USED_RESOLUTION"]
    rows = seen.seen()
    last_used = rows.last_used(holder)
    if last_used is None or seconds_since(last_used) >= resolution:
        now = utcnow()
        identifier = holder.caller.identifier
        db.session.execute(_RECORD_USE, {"key": identifier, "now": now})
        db.session.commit()
        rows.note_use(identifier, now)


# Every organization: what authenticate() and found() serve unless told one.
ANY_ORGANIZATION = None


def found(
    key: str,
    generation: int | None,
    organization_id: int | None = ANY_ORGANIZATION,
    facts: bool = False,
) -> Holder | None:
    """The key with this full value, for a request's own key and for a key another service
    checks (introspection, which asks for its `facts`: Holder's last fields), as the rows
    seen under the current `generation` have it (app/access/seen.py; None, a generation
    unknown: as the database has it now, every row dropped). Each caller names it. A key of
    another organization than `organization_id` (when one is named) is no key there:
    unknown, its policy untold and its use not recorded."""
    holder = seen.seen().holder(keyformat.digest(key), facts, generation)
    if holder is None or organization_id not in (ANY_ORGANIZATION, holder.caller.organization_id):
        return None
    return holder


def _judged(
    holder: Holder,
    address: Callable[[], str | None],
    door: str,
    is_use: bool,
    quota: bool = True,
) -> policy.Verdict:
    """The policy's verdict on a found key at `door`, counted: in the metrics, and in the
    key's usage when the request `is_use` (policy.verdict says what is no use, and what a
    use that spends no `quota` spends)."""
    decided = policy.verdict(holder.caller, address, is_use, quota)
    checked(door, decided.refusal or verdicts.ALLOWED, holder.caller.id if is_use else None)
    if decided.exhausted:  # this use was the last of a quota: recorded now, once a period
        current_app.extensions[limits.EXHAUSTED](holder.caller, decided.exhausted)
    return decided


def use(
    holder: Holder,
    address: Callable[[], str | None],
    door: str,
    is_use: bool = True,
    quota: bool = True,
) -> policy.Verdict:
    """The policy's verdict on a found key used at `door` (counted) from the client
    `address()` gives, spending its quotas when the use spends `quota`; a key it lets
    through has its use recorded (`last_used`: any request it authenticates, one that is
    no use included)."""
    decided = _judged(holder, address, door, is_use, quota)
    if decided.refusal is None:
        record_use(holder)
    return decided


def _admit(decided: policy.Verdict, challenge: Challenge) -> None:
    """The key's RateLimit and Quota headers on the answer, when it has a limit or quota
    of its own, and the verdict's refusal raised, if any."""
    if decided is not policy.USABLE:  # refused, or with a limit of its own
        policy.answer_with_headers(decided)
        if decided.refusal is not None:
            raise policy.refusal(decided, challenge)


def authenticate(
    rate: str = limits.PER_KEY,
    challenge: Challenge = CHALLENGE,
    schemes: tuple[str, ...] = (credentials.BASIC, credentials.BEARER),
    organization_id: int | None = ANY_ORGANIZATION,
    door: str = REST,
    facts: bool = False,
    is_use: bool = True,
    quota: bool = True,
) -> Holder:
    """The key this request's Authorization presents in one of `schemes` (of the
    organization `organization_id`, when one is named) at `door`, which its policy lets
    through from the client's address, as the read found it (its `caller`, and its `facts`
    when asked: forward auth answers the organization's name): 429 past the abuse limits
    (`rate` per key), 401 (with `challenge`) when there is no valid key, the policy's
    refusal otherwise. A request that `is_use` not (policy.verdict) spends nothing of the
    key's own limit and quota and is in no key's usage; spend() makes it a use later. One
    that spends no `quota` spends the rate limits that bind the key alone."""
    generation = limits.attempt()  # a failed authentication unless the key proves valid
    header = request.headers.get("Authorization")
    presented = credentials.presented(header, current_app.config["KEY_PREFIX"])
    valid = presented is not None and presented.scheme in schemes
    holder = found(presented.key, generation, organization_id, facts) if valid else None
    if holder is None:
        raise refused(door, unrecognised(header, challenge, schemes, valid))
    decided = use(holder, addresses.client_address, door, is_use, quota)
    if decided.refusal in policy.SPENT:
        limits.forgive()  # a key spent by its holder: it guessed nothing
    _admit(decided, challenge)
    limits.forgive_and_count(holder.caller.identifier, rate)  # a valid key: the same
    return holder


def spend(holder: Holder, door: str, challenge: Challenge, quota: bool = True) -> None:
    """The request that authenticate() let `holder` through as no use turns out to be one
    (MCP's tools/call, once its body is read): the policy judges it again, its own limit
    spent (its quotas when the use spends `quota`), and counts it in the key's usage; its
    refusal raised as authenticate() does. `last_used` and the abuse limits have counted
    the request already."""
    _admit(_judged(holder, addresses.client_address, door, True, quota), challenge)


def require_held(required: int, held: int, door: str) -> None:
    """403 naming the scopes of `required` that `held` lacks (bits), for a check of a key
    against the scopes a service requires at `door`: forward auth and the Flask extension.
    A key that holds them has each counted in its usage."""
    missing = exceeding(required, held)
    if missing:
        names = ", ".join(to_names(missing))
        raise refused(door, ApiError(403, "forbidden", f"This key lacks the scopes: {names}."))
    if required:
        checked(door, verdicts.ALLOWED, scopes=required)


def caller() -> Caller:
    """The key that authenticated the current request."""
    return g.caller


def managing_caller(rate: str = limits.PER_KEY, quota: bool = False) -> Caller:
    """The request's key, which must be of a managing kind: 403 for telemetry. Managing
    spends no quota of the key, only its rate limits (docs/api.md): the requests that make
    a key, or check one (introspection), say they spend `quota`."""
    caller = authenticate(rate, quota=quota).caller
    if caller.kind not in MANAGING_KINDS:
        raise refused(REST, ApiError(403, "forbidden", "Telemetry keys cannot manage API keys."))
    return caller


# What a view that makes keys carries (makes_keys): its requests spend the caller's quota.
MAKES_KEYS = "makes_keys"


def makes_keys(view: Callable) -> Callable:
    """Marks a view whose requests make a key (a create, a rotation, an import): of the
    key-management requests, the only ones that spend the caller's quota."""
    setattr(view, MAKES_KEYS, True)
    return view


def require_managing_key() -> None:
    """The before_request hook of the key-management blueprints: a managing key, whose
    quota is spent when the view makes keys."""
    view = current_app.view_functions.get(request.endpoint or "")
    g.caller = managing_caller(quota=getattr(view, MAKES_KEYS, False))


# The first segment of the paths whose answers are never kept.
_PRIVATE_ROOTS = frozenset({"api", "mcp"})


def no_store(response: Response) -> Response:
    """The application's after_request hook: every answer under /api and /mcp (key data,
    events, refusals, routing's 404 and 405 included) is never kept by a browser or a
    proxy. An application hook, not a blueprint's: routing refusals reach no blueprint."""
    if request.path.split("/", 2)[1] in _PRIVATE_ROOTS:
        response.headers["Cache-Control"] = "no-store"
    return response
