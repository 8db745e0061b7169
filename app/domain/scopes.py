"""The scope table and the key kinds: names, order, fixed sets and subset checks."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

# The scope table, in the order responses list scopes. A scope's position is also its bit
# in the stored `scope_bits`: append new scopes at the end, never reorder or remove one
# without a migration that rewrites the stored bits.
SCOPES: tuple[str, ...] = (
    "monitor:read",
    "monitor:write",
    "monitor:telemetry",
    "site:read",
    "site:write",
    "statuspage:read",
    "statuspage:write",
    "issue:read",
    "issue:write",
    "integration:read",
    "integration:write",
)
BITS: dict[str, int] = {name: 1 << position for position, name in enumerate(SCOPES)}
ALL: int = (1 << len(SCOPES)) - 1

TELEMETRY = "telemetry"
SDK_INTEGRATION = "sdk_integration"
CUSTOM = "custom"
KINDS: tuple[str, ...] = (TELEMETRY, SDK_INTEGRATION, CUSTOM)

# The kinds whose scopes are fixed (and so `immutable`), with their scopes.
FIXED: dict[str, int] = {TELEMETRY: BITS["monitor:telemetry"], SDK_INTEGRATION: ALL}
# The kinds that may use the key-management endpoints; telemetry keys live in less
# trusted places and may not.
MANAGING_KINDS: frozenset[str] = frozenset({SDK_INTEGRATION, CUSTOM})


def to_bits(names: Iterable[str]) -> int:
    """Fold scope names (duplicates allowed) into a bitmask."""
    bits = 0
    for name in names:
        bits |= BITS[name]
    return bits


@cache
def to_names(bits: int) -> tuple[str, ...]:
    """The scope names of a bitmask, in the order of the scope table."""
    return tuple(name for name in SCOPES if bits & BITS[name])


def exceeding(bits: int, held: int) -> int:
    """The scopes of `bits` that `held` lacks (0 when `bits` is within `held`)."""
    return bits & ~held


def is_immutable(kind: str) -> bool:
    """True for the kinds whose scopes cannot be changed."""
    return kind in FIXED


def misfit(kind: str, bits: int) -> str | None:
    """Why a key of `kind` cannot hold the scopes `bits`, or None when it can: a key of a
    fixed kind holds exactly its own; the one other kind, custom, needs at least one."""
    if kind not in FIXED:
        return None if bits else "A custom key needs at least one scope."
    if bits != FIXED[kind]:
        fixed = ", ".join(to_names(FIXED[kind]))
        return f"The scopes of {kind} keys are fixed: omit them or give exactly [{fixed}]."
    return None
