"""What a request presents as its key, and who it is once found: the one parser of
`Authorization`, called by everything that reads a key from a request (authentication and
its limits, and every later reader). It never raises on what a client sends."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import NamedTuple

from app.domain import keyformat
from app.domain.bindings import Bound

BASIC = "basic"
BEARER = "bearer"
NO_METADATA: Mapping[str, str] = MappingProxyType({})


class Presented(NamedTuple):
    """A key and the scheme that carried it: well formed (shape and checksum) when
    presented() gives it, as it was sent when offered() does."""

    scheme: str
    key: str


class Caller(NamedTuple):
    """The key that authenticated the current request."""

    id: int
    organization_id: int
    identifier: str
    kind: str
    scope_bits: int
    # Its place and time, which no key it makes may exceed (docs/design.md, "Key policy").
    allowed_ips: Sequence[str] = ()
    expires_at: datetime | None = None
    # The rest of its policy, which app/access/policy.py judges before each use.
    enabled: bool = True
    rate_limit_requests: int | None = None
    rate_limit_seconds: int | None = None
    metadata: Mapping[str, str] = NO_METADATA
    quota_requests: int | None = None
    quota_period: str | None = None
    quota_counter: str | None = None
    # Its name, which the audit log keeps beside its shown value.
    name: str = ""
    # The identity that holds it (its id in the table; None: none), and what binds it
    # beyond its own limits: its makers' and its identity's (app/domain/bindings.py).
    identity_id: int | None = None
    # An imported key's shown form (None: `<identifier>...`), as every answer names it.
    shown: str | None = None
    bound_by: tuple[Bound, ...] = ()
    # The identity as the doors name it: its id and external id; None: none.
    identity: Identity | None = None

    @property
    def counter(self) -> str:
        """The counter its own uses spend (bindings.lineage)."""
        return self.quota_counter or self.identifier


class Identity(NamedTuple):
    """An identity as a key shows it: its id and the organization's own id for it."""

    id: str
    external_id: str


def scheme_of(header: str | None) -> str | None:
    """The scheme (lowercase) of an Authorization header that carries something after it,
    well formed or not; None for no header or a scheme alone."""
    scheme, _, value = (header or "").partition(" ")
    return scheme.lower() if value.strip(" 	") else None


def presented(header: str | None, prefix: str | None = None) -> Presented | None:
    """The key of `Basic base64(<key>:)` (password ignored; no colon: the key alone) or
    `Bearer <key>`; None for no header, another scheme, an unreadable value, or a value
    that is not a well-formed key (so the database is not asked). Given this service's key
    `prefix`, a value that may be a key made elsewhere and imported is a key too
    (keyformat.is_presentable); one with this service's shape and prefix still needs its
    checksum."""
    offer = offered(header)
    if offer is None:
        return None
    if prefix is None:
        return offer if keyformat.is_full_key(offer.key) else None
    return offer if keyformat.is_presentable(offer.key, prefix) else None


def offered(header: str | None) -> Presented | None:
    """What `header` offers as its key, well formed or not (presented() judges that): the
    user name of `Basic base64(<key>:)` or the token of `Bearer <key>`; None for no header,
    another scheme or an unreadable Basic value."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    value = value.strip(" \t")
    if scheme == BASIC:
        try:
            # ValueError covers every refusal here: non-ASCII (UnicodeError), bad base64
            # (binascii.Error).
            decoded = base64.b64decode(value.encode("ascii"), validate=True).decode("ascii")
        except ValueError:
            return None
        key = decoded.partition(":")[0]
    elif scheme == BEARER:
        key = value
    else:
        return None
    return Presented(scheme, key)
