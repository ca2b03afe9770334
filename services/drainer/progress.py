"""Checkpoint progress: what has been applied, and saving it at a bounded rate.

``advance(ts)`` is called after the sink accepted the binlog with commit ts
``ts`` (or for a fake binlog, which has nothing to apply); ``run`` saves the
applied ts at most once every ``interval`` seconds (tidb-binlog: 3 s), and
``close(consistent)`` makes it save one last time and return.

Invariant: the saved ts never passes the applied ts, and both only grow, so a
restart from the saved checkpoint re-reads at worst binlogs that were applied
after the last save (never skips one). A save that failed for a reason that may
pass (a full disk: ``CheckpointError.retriable``) is retried with backoff while
the old checkpoint stays; any other failure, or one of the last save at close,
stops the drainer. ``saved_ts`` is what the drainer
reports as its ``maxCommitTS``: pumps go offline only once it passed them.

Worked example (interval 3 s, start ts 100): at t=0 ``advance(105)`` -> saved
at once (nothing saved for 3 s), saved=105; at t=1 ``advance(107)``, at t=2
``advance(110)`` -> nothing saved yet; at t=3 the run loop saves 110; at
t=3.5 ``close(consistent=True)`` -> saves 110 with consistent=true and returns.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from services.drainer.checkpoint import CheckpointStore
from services.drainer.errors import CheckpointError

log = logging.getLogger(__name__)

SAVE_INTERVAL = 3.0  # seconds between two periodic saves
RETRY_MAX = 30.0  # seconds; the longest wait between two tries of a failed save


class Checkpointer:
    def __init__(
        self,
        store: CheckpointStore,
        start_ts: int,
        *,
        interval: float = SAVE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        retry_delay: float = 0.5,
    ) -> None:
        self._store = store
        self._applied = start_ts
        self._saved = start_ts
        self._interval = interval
        self._clock = clock
        self._retry_delay = retry_delay  # seconds before the first retry of a failed save
        self._last_save = -math.inf
        self._wake = asyncio.Event()
        self._final: bool | None = None  # the consistent flag of the last save, once closing
        self.saves = 0

    @property
    def applied_ts(self) -> int:
        return self._applied

    @property
    def saved_ts(self) -> int:
        return self._saved

    def advance(self, commit_ts: int) -> None:
        """Everything up to ``commit_ts`` is applied downstream."""
        if commit_ts <= self._applied:
            raise ValueError(f"checkpoint cannot go from {self._applied} to {commit_ts}")
        clean = self._applied == self._saved
        self._applied = commit_ts
        if clean:
            self._wake.set()  # once per save round, not once per binlog

    def due_in(self) -> float | None:
        """Seconds until the next save may happen (<= 0: now); None if nothing to save."""
        if self._applied == self._saved:
            return None
        return self._last_save + self._interval - self._clock()

    async def save(self, consistent: bool = False) -> None:
        """Save the applied ts now."""
        ts = self._applied
        await self._store.save(ts, consistent)
        self._saved = ts
        self._last_save = self._clock()
        self.saves += 1
        log.debug("saved checkpoint %d (consistent=%s)", ts, consistent)

    def close(self, consistent: bool) -> None:
        """Make ``run`` save once more with ``consistent`` and return."""
        self._final = consistent
        self._wake.set()

    async def run(self) -> None:
        delay = self._retry_delay
        while True:
            if self._final is not None:
                await self.save(self._final)
                log.info("final checkpoint %d (consistent=%s)", self._saved, self._final)
                return
            due = self.due_in()
            if due is not None and due <= 0:
                try:
                    await self.save()
                    delay = self._retry_delay
                except CheckpointError as e:
                    if not e.retriable:
                        raise
                    log.warning(
                        "cannot save checkpoint %d, %d stays (retrying in %.1f s): %s",
                        self._applied,
                        self._saved,
                        delay,
                        e,
                    )
                    await self._sleep(delay)
                    delay = min(delay * 2, RETRY_MAX)
                continue
            await self._sleep(due)

    async def _sleep(self, seconds: float | None) -> None:
        """Wait ``seconds`` (None: until woken); ``advance`` or ``close`` may wake it sooner."""
        self._wake.clear()
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass
