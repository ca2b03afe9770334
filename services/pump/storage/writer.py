"""Group commit: one task turns queued write requests into batches.

Per batch, in one hand-off to the storage's write thread: one value-log append (a
single write of every record), one fdatasync and one index transaction; back on the
event loop the sorter is fed and every caller's future is resolved. While the thread
works, the next batch gathers in the queue.

Invariants: a caller's future resolves only after its binlogs are on disk and
indexed; a batch that fails at any step fails every future in it and leaves
nothing behind (the value log is cut back, the index transaction rolled
back), so nothing a caller was told failed is served later; batches reach the
value log, the index and the sorter in queue order.
"""

from __future__ import annotations

import asyncio
import collections
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
    queued_at: float  # perf_counter


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
        self._queue: collections.deque[_Request] = collections.deque()
        self._wakeup: asyncio.Future[None] | None = None  # the writer task waits for a request
        self._idle = asyncio.Event()  # nothing queued or being committed
        self._idle.set()
        self._space = asyncio.Event()  # pulsed when the writer takes requests off the queue
        self._closing = False
        self._stopped = False
        self._broken: StorageError | None = None

    async def submit(self, items: Sequence[WriteItem]) -> None:
        """Queue ``items`` as one request and wait until they are durable."""
        if self._closing:
            raise StorageClosed("storage is closing")
        if self._broken is not None:
            raise self._broken
        while len(self._queue) >= self._settings.kv_chan_cap:
            await self._space.wait()
        t0 = time.perf_counter()
        size = len(items[0].payload) if len(items) == 1 else sum(len(i.payload) for i in items)
        request = _Request(items, size, asyncio.get_running_loop().create_future(), t0)
        self._queue.append(request)
        self._idle.clear()
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)
        if self._stopped:
            self.fail_leftovers()
        await request.future

    async def run(self) -> None:
        """The writer task: runs until cancelled (after :meth:`stop`)."""
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            while not queue:
                self._wakeup = loop.create_future()
                await self._wakeup
            batch = [queue.popleft()]
            try:
                size = batch[0].size
                limit = max(self._settings.batch_bytes, size + SMALL_FIRST)
                while size < limit and queue:
                    batch.append(queue.popleft())
                    size += batch[-1].size
                self._space.set()
                self._space.clear()
                await self._commit(batch, size)
            finally:
                # Normally every future is resolved by now; after a crash they must not hang.
                _fail(batch, StorageError("storage writer stopped", retriable=False))
                if not queue:
                    self._idle.set()

    async def stop(self) -> None:
        """Refuse new requests and wait until every queued one is done."""
        self._closing = True
        await self._idle.wait()

    def break_down(self, error: StorageError) -> None:
        """The writer task died: fail what is queued and refuse everything from now on."""
        self._broken = error
        self.fail_leftovers()

    def fail_leftovers(self) -> None:
        """Fail requests still queued once the writer task is gone."""
        self._stopped = True
        error = self._broken or StorageClosed("storage closed")
        while self._queue:
            _fail([self._queue.popleft()], error)
        self._idle.set()
        self._space.set()

    async def _commit(self, batch: list[_Request], size: int) -> None:
        if self._broken is not None:
            _fail(batch, self._broken)
            return
        t0 = time.perf_counter()
        items = [it for r in batch for it in r.items]
        loop = asyncio.get_running_loop()
        try:
            appended = await loop.run_in_executor(self._executor, self._store, items)
        except _AppendFailed as e:
            self._stats.error_count["write"] += 1
            log.error("value log append of %d binlogs failed: %s", len(items), e.cause)
            _fail(batch, from_os_error("value log append", e.cause))
            return
        except _IndexFailed as e:
            self._stats.error_count["index"] += 1
            log.error("index transaction for %d binlogs failed: %s", len(items), e.cause)
            if e.undo_failed is not None:
                # The value log now holds records nobody was told about: stop writing.
                log.critical("cannot undo a failed batch in the value log: %s", e.undo_failed)
                self._broken = from_os_error("value log rollback", e.undo_failed)
                self._broken.retriable = False
            _fail(batch, from_sqlite_error("index write failed", e.cause))
            return
        self._on_written(items, appended)
        now = time.perf_counter()
        single = self._stats.write_binlog_duration_time["single"]
        for r in batch:
            if not r.future.done():
                r.future.set_result(None)
            single.observe(now - r.queued_at)
        self._account(items, size, appended, now - t0)

    def _store(self, items: list[WriteItem]) -> Appended:
        """On the write thread: append and sync the batch, then index it, as one hand-off.
        A failed index transaction cuts the batch back out of the value log."""
        try:
            appended = self._vlog.append(
                [it.payload for it in items], max(i.header.ts for i in items)
            )
        except OSError as e:
            raise _AppendFailed(e) from e
        fid = appended.fid
        rows = [
            row
            for it, off, sz in zip(items, appended.offsets, appended.sizes, strict=True)
            if (row := index_row(it.header, fid, off, sz)) is not None
        ]
        head = Pointer(fid, appended.offsets[-1] + appended.sizes[-1])
        try:
            self._index.put_batch_now(rows, head)
        except (sqlite3.Error, OSError) as e:
            failed = _IndexFailed(e)
            try:
                self._vlog.rollback(appended)
            except OSError as undo:
                failed.undo_failed = undo
            raise failed from e
        return appended

    def _account(self, items: list[WriteItem], size: int, a: Appended, took: float) -> None:
        st = self._stats
        st.batches += 1
        st.binlogs_written += len(items)
        st.write_binlog_size["batch"].observe(size)
        st.write_binlog_size["single"].observe_many([len(it.payload) for it in items])
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


class _AppendFailed(Exception):
    def __init__(self, cause: OSError) -> None:
        self.cause = cause


class _IndexFailed(Exception):
    def __init__(self, cause: sqlite3.Error | OSError) -> None:
        self.cause = cause
        self.undo_failed: OSError | None = None


def _fail(batch: list[_Request], error: StorageError) -> None:
    for r in batch:
        if not r.future.done():
            r.future.set_exception(error)
