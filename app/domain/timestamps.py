"""Time as the service stores it (naive UTC, microseconds) and shows it (ISO 8601, Z)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

# The smallest step between two stored times: an update moves `updated` at least this far.
TICK = timedelta(microseconds=1)


def utcnow() -> datetime:
    """The current time as stored: naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


_EPOCH = datetime(1970, 1, 1)


def seconds_since(moment: datetime) -> float:
    """Seconds from a stored time to now (a quarter of the work of `utcnow() - moment`)."""
    return time.time() - (moment - _EPOCH).total_seconds()


def iso(moment: datetime) -> str:
    """A stored time as ISO 8601 in UTC ending in Z, always with microseconds."""
    # isoformat is five times faster than strftime, and gives the same text for naive times.
    return moment.isoformat("T", "microseconds") + "Z"


def from_iso(shown: str) -> datetime:
    """A time as shown, back to a stored time."""
    return datetime.fromisoformat(shown.removesuffix("Z"))


def unix_seconds(shown: str) -> int:
    """A time as shown (or as the database writes it as text), in whole seconds since 1970
    (RFC 7662's `iat` and `exp`)."""
    return int(from_iso(shown).replace(tzinfo=UTC).timestamp())


class as_shown(FunctionElement):
    """A stored time in SQL, as the service shows it (what iso() gives), formatted by the
    database: a page of keys reads 150 times, and formatting them in Python cost a third
    of the page (bench/README.md)."""

    type = String()
    inherit_cache = True


@compiles(as_shown, "sqlite")
def _as_shown_on_sqlite(element: as_shown, compiler: Any, **kw: Any) -> str:
    # SQLAlchemy stores a SQLite time as text, 'YYYY-MM-DD HH:MM:SS.ffffff' (always six
    # digits of microseconds): ISO 8601 with a space for the T. A time written by other
    # means (SQL's CURRENT_TIMESTAMP has no fraction) shows as it was stored.
    return f"replace({compiler.process(element.clauses, **kw)}, ' ', 'T') || 'Z'"


@compiles(as_shown, "postgresql")
def _as_shown_on_postgresql(element: as_shown, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"""to_char({column}, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""
