"""A use's counters and what spending them decided: the shapes every storage of
app/access/counting answers in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class Counter(NamedTuple):
    """One of a use's counters: its key, the length of a new window, and how many uses
    a window allows."""

    key: str
    expiry: float
    limit: int


class Spent(NamedTuple):
    """What spend() did: the index of the first counter that refused the use (None: every
    counter counted it), each counter's count after, and the end of each one's window."""

    refused: int | None
    counts: list[int]
    ends: list[float]


def first_refusing(counters: Sequence[Counter], counts: Sequence[int]) -> int | None:
    """The index of the first counter whose count leaves it no use (None: none)."""
    for index, (counter, count) in enumerate(zip(counters, counts, strict=True)):
        if count >= counter.limit:
            return index
    return None
