"""Choosing the pump for a P-binlog (pure; no I/O).

Invariant: a selector only ever returns one of the pumps it was last given,
or None when it was given none. ``range`` walks the pumps round-robin and
starts over at the first one whenever the set changes; ``hash`` picks
``(start_ts + retry) % n`` so retries of one binlog move to the next pump.

Worked example (range, pumps [a, b, c]): selections go a, b, c, a, ...;
after ``set_pumps([a, c])`` the next one is a again, then c.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")

STRATEGIES = ("range", "hash")


class Selector(Protocol[T]):
    def set_pumps(self, pumps: Sequence[T]) -> None: ...

    def select(self, start_ts: int, retry: int) -> T | None: ...


class RangeSelector(Generic[T]):
    def __init__(self) -> None:
        self._pumps: tuple[T, ...] = ()
        self._offset = 0

    def set_pumps(self, pumps: Sequence[T]) -> None:
        self._pumps = tuple(pumps)
        self._offset = 0

    def select(self, start_ts: int, retry: int) -> T | None:
        if not self._pumps:
            return None
        if self._offset >= len(self._pumps):
            self._offset = 0
        pump = self._pumps[self._offset]
        self._offset += 1
        return pump


class HashSelector(Generic[T]):
    def __init__(self) -> None:
        self._pumps: tuple[T, ...] = ()

    def set_pumps(self, pumps: Sequence[T]) -> None:
        self._pumps = tuple(pumps)

    def select(self, start_ts: int, retry: int) -> T | None:
        if not self._pumps:
            return None
        return self._pumps[(start_ts + retry) % len(self._pumps)]


def make_selector(strategy: str) -> Selector[T]:
    """``range`` or ``hash``; anything else is a configuration error."""
    if strategy == "range":
        return RangeSelector()
    if strategy == "hash":
        return HashSelector()
    raise ValueError(f"unknown pump select strategy {strategy!r}; use one of {STRATEGIES}")
