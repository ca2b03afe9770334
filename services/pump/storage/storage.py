"""The pump's durable binlog store: value log + SQLite index + sorter, behind one object.

Write path: :meth:`Storage.write` -> group-commit writer (append, fdatasync,
index transaction) -> sorter -> max commit ts -> waiting pullers woken.
Read path: :meth:`Storage.pull` streams commits and fake binlogs up to the max
commit ts in commit-ts order.

Invariants:
- a write resolves only once its binlogs are durable and indexed, so a crash
  (kill -9 included) at any point loses nothing acknowledged: at open the
  value log is repaired and everything after ``min(headPointer,
  handlePointer)`` is indexed again and fed to the sorter again;
- the max commit ts never goes backwards (it is persisted with the sorter's
  handle pointer and the sorter restarts from both) and never passes a
  prewrite still waiting for its commit (see ``services.pump.sorter``).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing, asynccontextmanager
from pathlib import Path

from services.pump.sorter import Sorter
from services.pump.storage.errors import StorageClosed, StorageError, StorageFull
from services.pump.storage.index import Index, Meta
from services.pump.storage.reader import PulledBinlog, Reader
from services.pump.storage.recovery import catch_up, sort_item
from services.pump.storage.resolver import Resolver, WaitResolver
from services.pump.storage.segment import Pointer
from services.pump.storage.settings import SpaceGuard, StorageSettings
from services.pump.storage.stats import StorageStats
from services.pump.storage.upkeep import Upkeep
from services.pump.storage.vlog import Appended, ValueLog
from services.pump.storage.writer import GroupWriter, WriteItem
from tributary.wire import ts as tso
from tributary.wire.binlog import BinlogType
from tributary.wire.peek import BinlogHeader

log = logging.getLogger(__name__)

TICK = 1.0  # seconds between resolver checks / progress saves


def wall_clock_ts() -> int:
    """A TSO-shaped ts from the local clock (the pump passes its TSO's latest instead)."""
    return tso.from_seconds(time.time())


class Storage:
    def __init__(
        self,
        data_dir: Path,
        settings: StorageSettings,
        vlog: ValueLog,
        index: Index,
        meta: Meta,
        resolver: Resolver,
        latest_ts: Callable[[], int],
        monotonic: Callable[[], float],
        write_pool: ThreadPoolExecutor,
    ) -> None:
        self._settings = settings
        self._vlog = vlog
        self._index = index
        self.stats = StorageStats(
            gc_ts=meta.gc_ts,
            max_commit_ts=meta.max_commit_ts,
            stop_write_at_available_space=settings.stop_write_at_available_space,
        )
        self._sorter = Sorter(meta.max_commit_ts)
        self._space = SpaceGuard(
            data_dir,
            settings.stop_write_at_available_space,
            settings.space_check_interval,
            monotonic,
        )
        self._write_pool = write_pool  # one thread: value-log appends and index writes
        self._read_pool = ThreadPoolExecutor(2, thread_name_prefix="pump-vlog-read")
        self._writer = GroupWriter(
            vlog, index, self._written, settings, self.stats, self._write_pool
        )
        self._reader = Reader(index, vlog, self.stats, self._read_pool)
        self._upkeep = Upkeep(
            self._sorter,
            index,
            vlog,
            self._writer,
            settings,
            self.stats,
            resolver,
            latest_ts,
            self._advance,
            self._read_pool,
            (meta.max_commit_ts, meta.handle),
        )
        self._catch_up_from = _start_pointer(meta)
        self._advanced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._closed = asyncio.Event()

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        data_dir: Path | str,
        settings: StorageSettings | None = None,
        resolver: Resolver | None = None,
        latest_ts: Callable[[], int] = wall_clock_ts,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> AsyncIterator[Storage]:
        """Open (recovering) the storage in ``data_dir`` and run its tasks until exit.

        ``latest_ts`` returns the latest TSO ts the pump knows (txn timeouts are
        measured against it); ``monotonic`` paces the disk-space checks.
        """
        data_dir = Path(data_dir)
        settings = settings or StorageSettings()
        data_dir.mkdir(parents=True, exist_ok=True)
        vlog = await asyncio.to_thread(
            ValueLog.open, data_dir / "value", settings.segment_size, settings.sync_log
        )
        write_pool = ThreadPoolExecutor(1, thread_name_prefix="pump-storage-write")
        try:
            index = await Index.open(data_dir / "index.db", write_pool)
            try:
                meta = await index.meta()
            except BaseException:
                await index.close()
                raise
        except BaseException:
            vlog.close(finalize_min=settings.finalize_on_close)
            write_pool.shutdown(wait=False)
            raise
        resolver = resolver or WaitResolver()
        self = cls(
            data_dir, settings, vlog, index, meta, resolver, latest_ts, monotonic, write_pool
        )
        try:
            await self._recover()
            self._start()
            yield self
        finally:
            await self.close()

    def _start(self) -> None:
        # Owned here and cancelled/awaited by close(); not in a TaskGroup so that an
        # exception in the caller's ``async with`` body reaches it unwrapped.
        self._tasks = [
            asyncio.create_task(self._writer.run(), name="pump-storage-writer"),
            asyncio.create_task(self._tick(), name="pump-storage-ticker"),
        ]
        for task in self._tasks:
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        log.critical(
            "%s crashed; storage refuses further writes", task.get_name(), exc_info=task.exception()
        )
        self._writer.break_down(StorageError(f"{task.get_name()} crashed", retriable=False))

    async def _recover(self) -> None:
        start = self._catch_up_from
        await catch_up(self._vlog, self._index, self._sorter, start, self._read_pool)
        damaged = self._vlog.damaged
        self.stats.corrupt_bytes = self._vlog.torn_bytes + sum(e - s for _, s, e in damaged)
        self.stats.loss_binlog_count = len(damaged)
        self.stats.error_count["corrupt"] = len(damaged)
        self.stats.max_commit_ts = self._sorter.max_commit_ts
        log.info(
            "storage open: max commit ts %d, gc ts %d, %d binlogs waiting in the sorter, "
            "%d corrupt spans",
            self._sorter.max_commit_ts,
            self.stats.gc_ts,
            self._sorter.queued,
            len(damaged),
        )

    # --- state -------------------------------------------------------------------------

    @property
    def max_commit_ts(self) -> int:
        return self._sorter.max_commit_ts

    @property
    def gc_ts(self) -> int:
        return self.stats.gc_ts

    def all_matched(self) -> bool:
        """No stored prewrite is waiting for its commit or rollback."""
        return self._sorter.all_matched()

    def writable_for(self, header: BinlogHeader) -> bool:
        """False for a prewrite while free disk space is at or below the threshold."""
        if header.tp != BinlogType.Prewrite:
            return True
        ok = self._space.writable_for(header)
        self.stats.available_bytes = self._space.available
        return ok

    # --- writing -----------------------------------------------------------------------

    async def write(self, items: Sequence[WriteItem]) -> None:
        """Store ``items`` durably (one request; empty probe binlogs are skipped).

        Raises StorageFull (nothing stored) if a prewrite among them is refused for
        lack of disk space, StorageError if the batch failed, StorageClosed when closing.
        """
        real = [it for it in items if not it.header.is_probe]
        if not real:
            return
        # One look at the free space per request: it is the same for every prewrite in it.
        prewrite = next((it for it in real if it.header.tp == BinlogType.Prewrite), None)
        if prewrite is not None:
            if not self.writable_for(prewrite.header):
                self.stats.error_count["full"] += 1
                raise StorageFull(
                    f"available space {self._space.available} <= "
                    f"{self._settings.stop_write_at_available_space} bytes"
                )
        await self._writer.submit(real)

    def _written(self, items: Sequence[WriteItem], appended: Appended) -> None:
        fid = appended.fid
        sorted_items = []
        for it, off, size in zip(items, appended.offsets, appended.sizes, strict=True):
            if (item := sort_item(it.header, Pointer(fid, off + size))) is not None:
                sorted_items.append(item)
        if self._sorter.push_many(sorted_items):
            self._advance()

    def _advance(self) -> None:
        self.stats.max_commit_ts = self._sorter.max_commit_ts
        event, self._advanced = self._advanced, asyncio.Event()
        event.set()

    # --- reading -----------------------------------------------------------------------

    async def pull(self, after_ts: int) -> AsyncIterator[PulledBinlog]:
        """Commits and fake binlogs with ``after_ts < commit_ts <= max_commit_ts``, in
        commit-ts order, then more as the max commit ts advances; ends at close."""
        async with aclosing(self.pull_batches(after_ts)) as batches:
            async for batch in batches:
                for binlog in batch:
                    yield binlog

    async def pull_batches(self, after_ts: int) -> AsyncGenerator[list[PulledBinlog], None]:
        """What ``pull`` yields, a batch at a time as the storage reads them (a chunk of
        the index, up to ``PULL_CHUNK`` binlogs), never an empty batch."""
        last, gc_ts = after_ts, self.stats.gc_ts
        if last < gc_ts:
            log.error(
                "drainer requested purged binlogs after ts %d (gc ts %d); some binlogs may be lost",
                after_ts,
                gc_ts,
            )
            last = gc_ts
        while not self._closing:
            upto = self._sorter.max_commit_ts
            if upto <= last:
                event = self._advanced
                await event.wait()
                continue
            try:
                chunk, last = await self._reader.read_commits(last, upto)
            except Exception:
                if self._closing:
                    return
                raise
            if chunk:
                yield chunk

    async def backlog(self, after_ts: int) -> tuple[int, int]:
        """(commits a puller after ``after_ts`` can pull now, the max commit ts): the
        transactions with ``after_ts < commit_ts <= max_commit_ts``, fake binlogs not counted.
        Below the GC ts nothing is held, so nothing is counted there. StorageClosed while
        closing, StorageError if the index cannot be read."""
        if self._closing:
            raise StorageClosed("storage is closing")
        upto = self._sorter.max_commit_ts
        try:
            return await self._index.count_commits(after_ts, upto), upto
        except sqlite3.Error as e:
            raise StorageError(f"cannot count the commits after {after_ts}: {e}") from e

    async def get(self, ts: int) -> bytes | None:
        """The stored binlog keyed by ``ts`` (prewrite: start_ts; commit: commit_ts)."""
        return await self._reader.get(ts)

    # --- upkeep ------------------------------------------------------------------------

    async def resolve_expired(self) -> int:
        """Settle head-of-line prewrites older than ``max_txn_timeout``; how many settled."""
        return await self._upkeep.resolve_expired()

    async def gc(self, ts: int) -> None:
        """Purge binlogs older than ``ts`` minus the GC margin (600 s of TSO time).

        Ignored if ``ts`` is not above the current GC ts or not below the max commit ts.
        """
        await self._upkeep.gc(ts, self.stats.gc_ts)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            try:
                self.stats.available_bytes = self._space.available
                self.stats.capacity_bytes = self._space.capacity
                await self._upkeep.resolve_expired()
                await self._upkeep.save_progress()
            except Exception:
                log.exception("storage upkeep failed; retrying in %.0fs", TICK)

    # --- shutdown ------------------------------------------------------------------------

    async def close(self) -> None:
        """Drain queued writes, persist progress, finalize the segment, close the index."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            await self._stop_tasks()
            await self._upkeep.save_progress()
        finally:
            self._advance()  # wake pullers so they see the close
            try:
                await asyncio.to_thread(self._vlog.close, self._settings.finalize_on_close)
            finally:
                await self._index.close()
                self._write_pool.shutdown(wait=False)
                self._read_pool.shutdown(wait=False)
                self._closed.set()

    async def _stop_tasks(self) -> None:
        writer_task = self._tasks[0] if self._tasks else None
        for t in self._tasks[1:]:
            t.cancel()
        if self._tasks[1:]:
            await asyncio.wait(self._tasks[1:])
        if writer_task is not None and not writer_task.done():
            await self._writer.stop()
            writer_task.cancel()
            await asyncio.wait([writer_task])
        self._writer.fail_leftovers()


def _start_pointer(meta: Meta) -> Pointer:
    """Where restart catch-up begins: min(headPointer, handlePointer), or the start."""
    if meta.head is None or meta.handle is None:
        return Pointer(0, 0)
    return min(meta.head, meta.handle)
