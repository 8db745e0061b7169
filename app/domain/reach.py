"""Which keys a caller may see and manage (docs/api.md, "An identity is a boundary"): those
of its organization and, when the caller's own key belongs to an identity, only those of
that identity. The one rule every read and write of keys made for a caller asks (a list,
its total, a read, a change, a rotation, a delete, a quota grant, usage, introspection,
the audit log, the identities): a key beyond it is answered as another organization's is,
as if it did not exist."""

from __future__ import annotations

from typing import NamedTuple

from app.domain.credentials import Caller


class Reach(NamedTuple):
    """The keys a caller reaches: its organization's, and of them, when `identity_id` is
    not None, only those of that identity (its row's id)."""

    organization_id: int
    identity_id: int | None = None

    def sees(self, identity_id: int | None) -> bool:
        """Whether a key (or an identity) of the organization held by the identity
        `identity_id` (None: none) is within reach: always for a caller of no identity,
        else only its own identity's."""
        return self.identity_id is None or identity_id == self.identity_id


def of(caller: Caller) -> Reach:
    """What `caller` reaches."""
    return Reach(caller.organization_id, caller.identity_id)
