"""The keys in another Flask application: `ApiKeys` (the init_app pattern: its state lives
in app.extensions, nothing on the extension object), the `require_scopes(*scopes)` view
decorator and the `current_key` proxy. docs/extension.md shows it at work.

It serves one organization (docs/design.md, "The Flask extension"), in one of two ways
chosen by `init_app`:
- embedded, `ApiKeys(app, organization="NAME")`: the application is the service's own
  (create_app(), with the host's blueprints registered on it): the same process and
  database. A key of the named organization is authenticated exactly as the API does it
  (limits, expiry, `last_used`): app/access/auth.py. A key of any other organization does not
  exist here: 401 as for an unknown key, counted as a failed authentication, its use not
  recorded. The name is required: a host never serves every organization by omission.
- remote, `ApiKeys(app, introspect_url=..., key=...)`: any Flask application, against a
  running service, given a managing `key`, whose organization is the one served (its name
  asked once of the service's forward auth beside `introspect_url`): each presented key is
  checked with POST /api/introspect, with the host's request.remote_addr (after the host's
  own ProxyFix) as `client_ip`, for a key's `allowed_ips`; the answer is kept for
  `cache_seconds` (default 10) per key and client address, in a cache of at most
  `cache_size` answers (default 1024). That is its staleness: a key deleted, expired,
  disabled or rescoped in the service may be taken as it was for up to `cache_seconds`
  more, and its own rate_limit counts one use per answer kept, not per request.

Refusals are the service's, in its problem shape: 401 `unauthorized` (with the Basic
challenge), the key's policy's (401 `expired_key` or `disabled_key`, 403 `ip_not_allowed`,
429 `rate_limited` with Retry-After), 403 `forbidden` naming the missing scopes, and 503
`unavailable` in the remote way when the service does not answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib import error, parse
from urllib import request as http

from flask import Flask, current_app, g, request
from werkzeug.local import LocalProxy

from app.access import auth, policy
from app.access.uses import Allowance
from app.domain import credentials, keyformat
from app.domain.scopes import SCOPES, to_bits, to_names
from app.http import errors
from app.http.errors import RETRY_SHORTLY, ApiError
from app.storage import queries

EXTENSION = "api_keys"


@dataclass(frozen=True)
class CheckedKey:
    """The key that authenticated the current request, as a view sees it."""

    identifier: str
    kind: str
    scopes: tuple[str, ...]
    organization: str  # its name


# What introspection said of a key from an address: its facts, or the code of its refusal
# and the seconds to wait ("" for no key).
Checked = CheckedKey | tuple[str, int]

# The current request's key, inside a view decorated with require_scopes.
current_key: CheckedKey = LocalProxy(lambda: g.api_key)  # type: ignore[assignment]


class ApiKeys:
    """`ApiKeys(app, organization="NAME")` embedded; `ApiKeys(app, introspect_url=...,
    key=...)` remote."""

    def __init__(
        self,
        app: Flask | None = None,
        *,
        organization: str | None = None,
        introspect_url: str | None = None,
        key: str | None = None,
        cache_seconds: float = 10.0,
        cache_size: int = 1024,
        timeout: float = 5.0,
    ) -> None:
        self.organization = organization
        self.introspect_url = introspect_url
        self.key = key
        self.cache_seconds = cache_seconds
        self.cache_size = cache_size
        self.timeout = timeout
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        if self.introspect_url is None:
            if "limits" not in app.extensions:
                raise RuntimeError(
                    "ApiKeys(app) without introspect_url needs the service's own "
                    "application (create_app()); elsewhere give introspect_url and key."
                )
            if not self.organization:
                raise ValueError(
                    'an embedded ApiKeys serves one organization: ApiKeys(app, organization="NAME")'
                )
            app.extensions[EXTENSION] = _Embedded(self.organization)
            return
        if self.organization is not None:
            raise ValueError(
                "a remote ApiKeys serves its managing key's organization: give no organization"
            )
        if not self.key:
            raise ValueError("a remote ApiKeys needs the managing key it introspects with")
        if not self.introspect_url.startswith(("http://", "https://")):
            raise ValueError("introspect_url must be an http:// or https:// URL")
        app.extensions[EXTENSION] = _Remote(
            self.introspect_url, self.key, self.cache_seconds, self.cache_size, self.timeout
        )
        app.register_error_handler(ApiError, _problem)


def require_scopes(*scopes: str) -> Callable:
    """A view that needs a key holding every one of `scopes` (none: any valid key)."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scopes: {', '.join(unknown)}")
    required = to_bits(scopes)

    def decorator(view: Callable) -> Callable:
        @functools.wraps(view)
        def checked(*args: Any, **kwargs: Any) -> Any:
            key = current_app.extensions[EXTENSION].check()
            auth.require_held(required, to_bits(key.scopes), auth.EXTENSION)
            g.api_key = key
            return view(*args, **kwargs)

        return checked

    return decorator


def _problem(error: ApiError):
    return errors.problem(errors.refusal_document(error), error.headers)


# No organization has this id: the embedded extension's organization before it exists.
_NO_ORGANIZATION = 0


class _Embedded:
    """The service's own authentication, in its own application, for one organization."""

    def __init__(self, organization: str) -> None:
        self.organization = organization
        # Found on the first request that needs it (organizations are never renamed).
        self.organization_id: int | None = None
        self.warned = False

    def check(self) -> CheckedKey:
        caller = auth.authenticate(
            organization_id=self._organization_id(), door=auth.EXTENSION
        ).caller
        return CheckedKey(
            caller.identifier, caller.kind, to_names(caller.scope_bits), self.organization
        )

    def _organization_id(self) -> int:
        """The organization's id, found once it exists; till then one no key has (ids
        start at 1), so that every key is unknown here, and the host's log says why once."""
        if self.organization_id is None:
            self.organization_id = queries.organization_id(self.organization)
            if self.organization_id is None:
                if not self.warned:
                    current_app.logger.warning(
                        "ApiKeys serves the organization %r, which does not exist: no key passes.",
                        self.organization,
                    )
                    self.warned = True
                return _NO_ORGANIZATION
        return self.organization_id


class _Remote:
    """POST /api/introspect of a running service, its answers cached briefly."""

    def __init__(
        self, url: str, key: str, cache_seconds: float, cache_size: int, timeout: float
    ) -> None:
        self.url = url
        self.key = key
        self.cache_seconds = cache_seconds
        self.cache_size = cache_size
        self.timeout = timeout
        # (digest of the presented key, client address) -> (when the answer goes stale, the
        # key, or the service's refusal: (its code, its retry_after), ("", 0) for no key).
        self.cache: OrderedDict[tuple[bytes, str | None], tuple[float, Checked]] = OrderedDict()
        self.lock = threading.Lock()
        # The managing key's organization's name, asked once.
        self.organization: str | None = None

    def check(self) -> CheckedKey:
        # A host (remote mode) without KEY_PREFIX: the service's default.
        prefix = current_app.config.get("KEY_PREFIX", keyformat.DEFAULT_PREFIX)
        header = request.headers.get("Authorization")
        presented = credentials.presented(header, prefix)
        if presented is None:
            raise auth.unrecognised(header)
        address = request.remote_addr
        entry = (hashlib.sha256(presented.key.encode("ascii")).digest(), address)
        now = time.monotonic()
        with self.lock:
            cached = self.cache.get(entry)
        if cached is None or cached[0] <= now:
            cached = (now + self.cache_seconds, self._introspect(presented.key, address))
            with self.lock:
                self.cache[entry] = cached
                self.cache.move_to_end(entry)
                while len(self.cache) > self.cache_size:
                    self.cache.popitem(last=False)
        checked = cached[1]
        if isinstance(checked, CheckedKey):
            return checked
        code, retry_after = checked
        if code not in policy.REFUSALS:  # unknown, deleted, another organization's
            raise auth.unrecognised(header, well_formed=True)
        allowance = Allowance(False, 0, retry_after)
        raise policy.refusal(policy.Verdict(code, allowance), auth.CHALLENGE)

    def _introspect(self, token: str, address: str | None) -> Checked:
        form = {"token": token} if address is None else {"token": token, "client_ip": address}
        _, body = self._ask(self.url, form)
        try:
            facts = json.loads(body)
            if not facts["active"]:
                return (str(facts.get("code", "")), max(1, int(facts.get("retry_after", 1))))
            scopes = tuple(facts["scope"].split())
            return CheckedKey(facts["client_id"], facts["kind"], scopes, self._organization())
        except (ValueError, LookupError, TypeError, AttributeError) as failure:
            # Not introspection's answer (a wrong URL, another service): the same as none.
            raise _unavailable(ValueError(f"not an introspection answer: {failure!r}")) from None

    def _organization(self) -> str:
        """The name forward auth gives the managing key's organization (the one whose keys
        introspection answers for)."""
        if self.organization is None:
            headers, _ = self._ask(parse.urljoin(self.url, "forward-auth"), {})
            self.organization = parse.unquote(headers["X-Api-Key-Organization"])
        return self.organization

    def _ask(self, url: str, form: dict[str, str]) -> tuple[Message, bytes]:
        """The headers and body of the service's answer to a POST of `form` with the
        managing key; 503 when it does not answer, or refuses."""
        body = parse.urlencode(form).encode("ascii")
        asking = http.Request(url, data=body, method="POST")  # noqa: S310 (http(s), init_app)
        asking.add_header("Authorization", "Bearer " + self.key)
        asking.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            # The URL's scheme is http or https: init_app refuses any other.
            with http.urlopen(asking, timeout=self.timeout) as answer:  # noqa: S310  # nosec B310
                return answer.headers, answer.read()
        except (error.URLError, OSError) as failure:
            raise _unavailable(failure) from None


def _unavailable(failure: Exception) -> ApiError:
    current_app.logger.warning("The API Keys Service did not answer: %s", failure)
    return ApiError(
        503,
        "unavailable",
        "The API Keys Service does not answer; retry shortly.",
        headers=[RETRY_SHORTLY],
    )
