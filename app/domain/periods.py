"""The UTC calendar periods of a quota (app/quotas): a day from 00:00 UTC, a week from
Monday, a month from its 1st; `lifetime` is never renewed."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

DAY, WEEK, MONTH, LIFETIME = "day", "week", "month", "lifetime"
PERIODS = (DAY, WEEK, MONTH, LIFETIME)
# The end a lifetime never reaches, where a moment is needed (a notice's, app/webhooks).
NEVER = datetime(9999, 12, 31)
# A lifetime's counter is kept this long (about a hundred years).
LIFETIME_SECONDS = 100 * 365 * 86_400


class Window(NamedTuple):
    """The period that holds a moment: its name for the counter, and its end (None: never)."""

    name: str
    end: datetime | None


# The window each period gave last, with its start: the next moment of the same window gets
# it back after two comparisons, not the calendar's arithmetic (bench/README.md).
_last: dict[str, tuple[datetime, Window]] = {}
_LIFETIME = Window(LIFETIME, None)


def window(period: str, now: datetime) -> Window:
    """The `period` (one of PERIODS) that holds `now` (naive UTC)."""
    if period == LIFETIME:
        return _LIFETIME
    last = _last.get(period)
    if last is not None and last[0] <= now < last[1].end:  # type: ignore[operator]
        return last[1]
    start, found = _window(period, now)
    _last[period] = (start, found)
    return found


def start(period: str, now: datetime) -> datetime | None:
    """When the `period` that holds `now` began (None: a lifetime, which has no start)."""
    return None if period == LIFETIME else _window(period, now)[0]


def _window(period: str, now: datetime) -> tuple[datetime, Window]:
    """The start of the `period` (a calendar one) that holds `now`, and its Window."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == DAY:
        return day, Window(day.date().isoformat(), day + timedelta(days=1))
    if period == WEEK:
        start = day - timedelta(days=day.weekday())
        return start, Window(f"week-{start.date().isoformat()}", start + timedelta(days=7))
    start = day.replace(day=1)
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start, Window(f"month-{start.date().isoformat()[:7]}", end)


def seconds_left(ends: datetime | None, now: datetime) -> float:
    """Seconds from `now` to a window's end; a lifetime's counter is kept LIFETIME_SECONDS."""
    if ends is None:
        return LIFETIME_SECONDS
    return (ends - now).total_seconds()
