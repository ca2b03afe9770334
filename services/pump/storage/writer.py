"""Group commit: one task turns queued write requests into batches.

Per batch: one value-log append (a single write of every record) and one
fdatasync in a worker thread, then one index transaction, then the sorter is
fed and every caller's future is resolved.

Invariants: a caller's future resolves only after its binlogs are on disk and
indexed; a batch that fails at any step fails every future in it and leaves
nothing behind (the value log is cut back, the index transaction rolled
back), so nothing a caller was told failed is served later; batches reach the
value log, the index and the sorter in queue order.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from services.pump.storage.errors import (
    StorageClosed,
    StorageError,
    from_os_error,
    from_sqlite_error,
)
from services.pump.storage.index import Index, IndexRow
from services.pump.storage.segment import Pointer
from services.pump.storage.settings import StorageSettings
from services.pump.storage.stats import StorageStats
from services.pump.storage.vlog import Appended, ValueLog
from tributary.wire.binlog import BinlogType
from tributary.wire.peek import BinlogHeader

log = logging.getLogger(__name__)

SMALL_FIRST = 128 * 1024  # a batch may always grow by this much past its first request


@dataclass(frozen=True, slots=True)
class WriteItem:
    """A validated binlog to store: its marshalled bytes and its peeked header."""

    payload: bytes
    header: BinlogHeader


@dataclass(slots=True)
class _Request:
    items: Sequence[WriteItem]
    size: int
    future: asyncio.Future[None]


def index_row(header: BinlogHeader, fid: int, offset: int, size: int) -> IndexRow | None:
    """The index row of a binlog: prewrites by start_ts, commits and fake binlogs by
    commit_ts; a plain rollback (and an obsolete type) has none."""
    if header.tp == BinlogType.Prewrite:
        return (header.start_ts, 0, fid, offset, size, header.start_ts)
    if header.tp == BinlogType.Commit or header.is_fake:
        return (header.commit_ts, int(header.tp), fid, offset, size, header.start_ts)
    return None


Written = Callable[[Sequence[WriteItem], Appended], None]


class GroupWriter:
    def __init__(
        self,
        vlog: ValueLog,
        index: Index,
        on_written: Written,
        settings: StorageSettings,
        stats: StorageStats,
        executor: Executor,
    ) -> None:
        self._vlog = vlog
        self._index = index
        self._on_written = on_written
        self._settings = settings
        self._stats = stats
        self._executor = executor
        self._queue: asyncio.Queue[_Request] = asyncio.Queue(settings.kv_chan_cap)
        self._closing = False
        self._stopped = False
        self._broken: StorageError | None = None

    async def submit(self, items: Sequence[WriteItem]) -> None:
        """Queue ``items`` as one request and wait until they are durable."""
        if self._closing:
            raise StorageClosed("storage is closing")
        if self._broken is not None:
            raise self._broken
        t0 = time.perf_counter()
        size = len(items[0].payload) if len(items) == 1 else sum(len(i.payload) for i in items)
        request = _Request(items, size, asyncio.get_running_loop().create_future())
        await self._queue.put(request)
        if self._stopped:
            self.fail_leftovers()
        await request.future
        self._stats.write_binlog_duration_time["single"].observe(time.perf_counter() - t0)

    async def run(self) -> None:
        """The writer task: runs until cancelled (after :meth:`stop`)."""
        queue = self._queue
        while True:
            batch = [await queue.get()]
            try:
                size = batch[0].size
                limit = max(self._settings.batch_bytes, size + SMALL_FIRST)
                while size < limit and not queue.empty():
                    batch.append(queue.get_nowait())
                    size += batch[-1].size
                await self._commit(batch, size)
            finally:
                # Normally every future is resolved by now; after a crash they must not hang.
                _fail(batch, StorageError("storage writer stopped", retriable=False))
                for _ in batch:
                    queue.task_done()

    async def stop(self) -> None:
        """Refuse new requests and wait until every queued one is done."""
        self._closing = True
        await self._queue.join()

    def break_down(self, error: StorageError) -> None:
        """The writer task died: fail what is queued and refuse everything from now on."""
        self._broken = error
        self.fail_leftovers()

    def fail_leftovers(self) -> None:
        """Fail requests still queued once the writer task is gone."""
        self._stopped = True
        error = self._broken or StorageClosed("storage closed")
        while not self._queue.empty():
            _fail([self._queue.get_nowait()], error)
            self._queue.task_done()

    async def _commit(self, batch: list[_Request], size: int) -> None:
        if self._broken is not None:
            _fail(batch, self._broken)
            return
        t0 = time.perf_counter()
        items = [it for r in batch for it in r.items]
        loop = asyncio.get_running_loop()
        max_ts = max(it.header.ts for it in items)
        payloads = [it.payload for it in items]
        try:
            appended = await loop.run_in_executor(
                self._executor, self._vlog.append, payloads, max_ts
            )
        except OSError as e:
            self._stats.error_count["write"] += 1
            log.error("value log append of %d binlogs failed: %s", len(items), e)
            _fail(batch, from_os_error("value log append", e))
            return
        if not await self._index_batch(batch, items, appended):
            return
        self._on_written(items, appended)
        for r in batch:
            if not r.future.done():
                r.future.set_result(None)
        self._account(items, size, appended, time.perf_counter() - t0)

    async def _index_batch(
        self, batch: list[_Request], items: list[WriteItem], appended: Appended
    ) -> bool:
        fid = appended.fid
        rows = [
            row
            for it, off, sz in zip(items, appended.offsets, appended.sizes, strict=True)
            if (row := index_row(it.header, fid, off, sz)) is not None
        ]
        head = Pointer(fid, appended.offsets[-1] + appended.sizes[-1])
        try:
            await self._index.put_batch(rows, head)
            return True
        except (sqlite3.Error, OSError) as e:
            self._stats.error_count["index"] += 1
            log.error("index transaction for %d binlogs failed: %s", len(items), e)
            error = from_sqlite_error("index write failed", e)
        try:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, self._vlog.rollback, appended)
        except OSError as e:
            # The value log now holds records nobody was told about: stop writing.
            log.critical("cannot undo a failed batch in the value log: %s", e)
            self._broken = from_os_error("value log rollback", e)
            self._broken.retriable = False
        _fail(batch, error)
        return False

    def _account(self, items: list[WriteItem], size: int, a: Appended, took: float) -> None:
        st = self._stats
        st.batches += 1
        st.binlogs_written += len(items)
        st.write_binlog_size["batch"].observe(size)
        single = st.write_binlog_size["single"]
        for it in items:
            single.observe(len(it.payload))
        durations = st.write_binlog_duration_time
        durations["batch"].observe(took)
        durations["to_disk"].observe(a.to_disk)
        if self._settings.sync_log:
            durations["fsync"].observe(a.fsync)
        if a.rotate:
            durations["rotate"].observe(a.rotate)
        if took > self._settings.slow_write_threshold:
            log.warning(
                "slow write: batch of %d binlogs (%d bytes) took %.3fs (fsync %.3fs)",
                len(items),
                size,
                took,
                a.fsync,
            )


def _fail(batch: list[_Request], error: StorageError) -> None:
    for r in batch:
        if not r.future.done():
            r.future.set_exception(error)
