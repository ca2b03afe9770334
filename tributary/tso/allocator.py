"""The timestamp allocator of the TSO leader (pure logic; storage and clock are injected).

Invariant: no timestamp is handed out whose physical part exceeds the window
saved in the store, and a leader starts strictly above the saved window. Since
every term saves its window before serving, timestamps never go backwards
across restarts or leader changes, even when wall clocks disagree or step back.

Worked example (save interval 3000 ms, extend margin 1000 ms):
  store holds 10_000; the new leader's clock says 9_000 (it is behind).
  sync():   start = max(9_000, 10_000 + 1) = 10_001; save 13_001; serve
            (10_001, 1), (10_001, 2), ...
  tick() at now=12_100: physical -> 12_100; 13_001 - 12_100 <= 1000, so save
            15_100 first, then move physical.
  allocate(5) with logical at 2^18 - 3 in physical 12_100: 12_101 <= window,
            so physical -> 12_101 and the range is (12_101, 1..5].
"""

from __future__ import annotations

import logging
from typing import Protocol

from tributary.tso.clock import Clock
from tributary.tso.errors import LogicalOverflow, TsoError
from tributary.wire.ts import MAX_LOGICAL, compose

log = logging.getLogger(__name__)

MAX_COUNT = MAX_LOGICAL - 1  # logical 0 is never handed out, so one ms holds 2^18 - 1
SAVE_INTERVAL_MS = 3000
EXTEND_MARGIN_MS = 1000


class WindowStore(Protocol):
    """Where the leader keeps its high-water physical time (ms)."""

    async def load(self) -> int | None:
        """The saved window, or None if no leader ever saved one."""

    async def save(self, window_ms: int) -> None:
        """Persist ``window_ms``; raises NotLeader if this leader was deposed."""


class TimestampAllocator:
    """Hands out ``(physical, logical)`` ranges for one leadership term."""

    def __init__(
        self,
        clock: Clock,
        store: WindowStore,
        *,
        save_interval_ms: int = SAVE_INTERVAL_MS,
        extend_margin_ms: int = EXTEND_MARGIN_MS,
    ) -> None:
        if not 0 < extend_margin_ms < save_interval_ms:
            raise ValueError("need 0 < extend margin < save interval")
        self._clock = clock
        self._store = store
        self._save_interval = save_interval_ms
        self._margin = extend_margin_ms
        self._physical = 0
        self._logical = 0
        self._window = 0
        self._ready = False

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def physical_ms(self) -> int:
        return self._physical

    @property
    def window_ms(self) -> int:
        return self._window

    async def sync(self) -> None:
        """Start a term: begin above the saved window and save a new one before serving."""
        saved = await self._store.load() or 0
        now = self._clock.now_ms()
        start = max(now, saved + 1)
        if start > now:
            log.warning("starting TSO %d ms ahead of the local clock", start - now)
        window = start + self._save_interval
        await self._store.save(window)
        self._physical, self._logical, self._window = start, 0, window
        self._ready = True
        log.info("TSO synced: physical %d, window %d (previous %d)", start, window, saved)

    async def tick(self) -> None:
        """Periodic update: follow the clock, and extend the window before reaching it."""
        self._require_ready()
        now = self._clock.now_ms()
        if now > self._physical:
            target = now
        elif self._logical > MAX_LOGICAL // 2:
            target = self._physical + 1  # clock stalled or stepped back under load
        else:
            target = self._physical
        if self._window - target <= self._margin:
            window = target + self._save_interval
            await self._store.save(window)
            self._window = max(self._window, window)
        # allocate() may have stepped physical forward while we awaited the save
        if target > self._physical:
            self._physical, self._logical = target, 0

    def allocate(self, count: int) -> int:
        """Reserve ``count`` timestamps; return the highest. Range is (last - count, last]."""
        self._require_ready()
        if not 1 <= count <= MAX_COUNT:
            raise TsoError(f"count must be in [1, {MAX_COUNT}], got {count}", retriable=False)
        if self._logical + count >= MAX_LOGICAL:
            if self._physical + 1 > self._window:
                raise LogicalOverflow()
            self._physical, self._logical = self._physical + 1, 0
        self._logical += count
        return compose(self._physical, self._logical)

    def _require_ready(self) -> None:
        if not self._ready:
            raise TsoError("TSO allocator is not synced yet", retriable=True)
