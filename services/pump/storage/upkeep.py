"""Storage upkeep: settle timed-out prewrites, persist sorter progress, purge old binlogs.

Invariants:
- only a prewrite that blocks the sorter's head and is older than
  ``max_txn_timeout`` (TSO physical time against the latest ts the pump
  supplies) is given to the resolver; a commit answer is stored as a real
  C-binlog (so it is durable and pulled like any other), a rollback answer
  only releases the sorter; a running answer (``WaitResolver``, the default) keeps
  the prewrite: every prewrite past the timeout is listed in
  ``stats.stuck_prewrites`` and logged at ERROR once with its start ts, and again at
  INFO when its commit finally arrives;
- ``maxCommitTS`` and ``handlePointer`` are saved together from one sorter
  state, so a restart resumes from a consistent pair;
- GC never purges at or above the max commit ts, and keeps ``gc_margin`` of
  history below the GC ts so late commits still find their prewrite.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor

from services.pump.sorter import Sorter
from services.pump.storage.index import Index
from services.pump.storage.resolver import Outcome, Resolver
from services.pump.storage.segment import Pointer
from services.pump.storage.settings import StorageSettings
from services.pump.storage.stats import StorageStats
from services.pump.storage.vlog import ValueLog
from services.pump.storage.writer import GroupWriter, WriteItem
from tributary.wire import ts as tso
from tributary.wire.binlog import Binlog, BinlogType
from tributary.wire.peek import BinlogHeader

log = logging.getLogger(__name__)

GC_CHUNK = 1024  # index rows deleted per GC transaction
COMMIT = BinlogType(BinlogType.Commit)


class Upkeep:
    def __init__(
        self,
        sorter: Sorter,
        index: Index,
        vlog: ValueLog,
        writer: GroupWriter,
        settings: StorageSettings,
        stats: StorageStats,
        resolver: Resolver,
        latest_ts: Callable[[], int],
        advanced: Callable[[], None],
        executor: Executor,
        saved: tuple[int, Pointer | None],
    ) -> None:
        self._sorter = sorter
        self._index = index
        self._vlog = vlog
        self._writer = writer
        self._settings = settings
        self._stats = stats
        self._resolver = resolver
        self._latest_ts = latest_ts
        self._advanced = advanced
        self._executor = executor
        self._saved: tuple[int, object] = saved
        self._resolve_lock = asyncio.Lock()
        self._gc_lock = asyncio.Lock()
        self._stuck: set[int] = set()

    async def resolve_expired(self) -> int:
        """Settle head-of-line prewrites older than ``max_txn_timeout``; how many settled."""
        async with self._resolve_lock:
            settled = 0
            limit_ms = int(self._settings.max_txn_timeout * 1000)
            while (start := self._sorter.blocking_prewrite()) is not None:
                if tso.physical_ms(self._latest_ts()) - tso.physical_ms(start) <= limit_ms:
                    break
                resolution = await self._resolver.resolve(start)
                if resolution.outcome is Outcome.RUNNING:
                    break
                self._stats.resolved[resolution.outcome.value] += 1
                settled += 1
                if resolution.outcome is Outcome.COMMITTED:
                    await self._write_commit(start, resolution.commit_ts)
                elif self._sorter.settle(start):
                    self._advanced()
            self._report_stuck(limit_ms)
            return settled

    def _report_stuck(self, limit_ms: int) -> None:
        """List (and log once) every prewrite waiting past the timeout; log late commits."""
        now_ms = tso.physical_ms(self._latest_ts())
        stuck = [s for s in self._sorter.waiting() if now_ms - tso.physical_ms(s) > limit_ms]
        for start in stuck:
            if start not in self._stuck:
                log.error(
                    "prewrite start_ts=%d has waited %.0f s (max-txn-timeout %.0f s) for its "
                    "commit; keeping it: the max commit ts (and every drainer) waits behind "
                    "it until the commit or rollback arrives",
                    start,
                    (now_ms - tso.physical_ms(start)) / 1000,
                    limit_ms / 1000,
                )
        now = set(stuck)
        for start in sorted(self._stuck - now):
            log.info("stuck prewrite start_ts=%d got its commit or rollback at last", start)
        self._stuck = now
        self._stats.stuck_prewrites = stuck

    async def _write_commit(self, start_ts: int, commit_ts: int) -> None:
        payload = bytes(Binlog(tp=COMMIT, start_ts=start_ts, commit_ts=commit_ts))
        header = BinlogHeader(COMMIT, start_ts, commit_ts, 0)
        log.info("storing commit binlog start_ts=%d commit_ts=%d (resolved)", start_ts, commit_ts)
        await self._writer.submit([WriteItem(payload, header)])

    async def save_progress(self) -> None:
        """Persist the max commit ts with the sorter's handle pointer, if they moved."""
        state = (self._sorter.max_commit_ts, self._sorter.handled)
        handle = state[1]
        if state != self._saved and isinstance(handle, Pointer):
            await self._index.save_progress(state[0], handle)
            self._saved = state

    async def gc(self, ts: int, current_gc_ts: int) -> bool:
        """Purge up to ``ts`` minus the margin; False if the request was ignored."""
        async with self._gc_lock:
            max_commit_ts = self._sorter.max_commit_ts
            if ts <= current_gc_ts:
                log.info("gc ts %d ignored: not above current gc ts %d", ts, current_gc_ts)
                return False
            if ts >= max_commit_ts:
                log.warning("unsafe gc ts %d ignored: max commit ts is %d", ts, max_commit_ts)
                return False
            await self._index.save_gc_ts(ts)
            self._stats.gc_ts = ts
            cutoff = ts - tso.compose(int(self._settings.gc_margin * 1000), 0)
            if cutoff > 0:
                await self._purge(cutoff)
            return True

    async def _purge(self, cutoff: int) -> None:
        # Small transactions, so the writer's index transactions slip in between.
        while (n := await self._index.delete_upto(cutoff, GC_CHUNK)) > 0:
            self._stats.deleted_kv_total += n
        loop = asyncio.get_running_loop()
        removed = await loop.run_in_executor(self._executor, self._vlog.remove_upto, cutoff)
        self._stats.done_gc_ts = cutoff
        log.info("gc up to ts %d done: %d value-log segments removed", cutoff, len(removed))
