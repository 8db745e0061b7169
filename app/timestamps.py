"""Time as the service stores it (naive UTC, microseconds) and shows it (ISO 8601, Z)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# The smallest step between two stored times: an update moves `updated` at least this far.
TICK = timedelta(microseconds=1)


def utcnow() -> datetime:
    """The current time as stored: naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


def iso(moment: datetime | None) -> str | None:
    """A stored time as ISO 8601 in UTC ending in Z, always with microseconds."""
    if moment is None:
        return None
    # isoformat is five times faster than strftime, and gives the same text for naive times.
    return moment.isoformat("T", "microseconds") + "Z"
