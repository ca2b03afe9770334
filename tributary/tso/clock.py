"""Wall-clock sources for the TSO, injectable so time-based logic tests deterministically.

Invariant: a Clock only reports time; nothing here assumes it is monotonic (the
allocator copes with a wall clock that steps backwards).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""


class SystemClock:
    """The host's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests, simulations)."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms

    def advance(self, ms: int) -> None:
        self._now += ms
