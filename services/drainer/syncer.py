"""Turning merged binlogs into transactions and applying them to the sink in batches.

Two duties run side by side: *convert* takes merged binlogs in commit-ts order and turns each
into a ``Txn`` (``convert.Converter``) into a buffer bounded by row count; *apply* takes
everything buffered (up to ``batch_rows`` row changes, at least one transaction) and hands it
to the sink as one batch. Under load the buffer fills while the sink works, so batches grow
and the downstream sees few, large transactions; when idle a lone transaction goes at once.

Invariants:

* the checkpoint passes a binlog only after the sink accepted the batch holding it (the sink
  keeps its own checkpoint in the same downstream transaction, the drainer's file checkpoint
  follows), and the merged queue's ``task_done`` is called only then, so ``drain`` waits for
  everything merged to be applied;
* with a pipelined sink (``tributary.sinks.Pipelined``, the Kafka sink) *apply* submits the
  next batch while earlier ones wait for their acks; a batch counts as accepted (checkpoint,
  ``task_done``) only once the sink's own checkpoint passed its last transaction, and when
  nothing is buffered the syncer waits for the acks (``flush``) instead of idling with them
  outstanding. A failed delivery is retried as one ``apply`` of every batch not acknowledged;
* markers (fake, filtered and ignored binlogs) only move the checkpoint: inside a batch only
  a trailing one is kept, since a batch moves the sink's checkpoint to its last commit ts;
* a sink error that may pass (``retriable``) is retried with backoff for as long as it takes,
  without losing or reordering anything; any other error stops the drainer with nothing
  after the failing batch applied or checkpointed. A binlog that cannot be converted stops it
  once everything before that binlog was applied, so the checkpoint ends right below it.

With a ``CatchUp`` (``[syncer.catchup]``), *convert* may hand a stretch of the stream to a
Spark job instead (``services.drainer.catchup``): it waits until everything buffered was
applied, stages the range, runs the job, and then puts one checkpoint-only marker for the
whole range into the buffer, so the checkpoint moves past the range only through the sink.

Safe mode is forced on for ``safe_mode_window`` seconds after the start (tidb-binlog: 5 min),
so rows applied before a crash but after the checkpoint replay harmlessly; after that it is
the configured value.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import NoReturn

from services.drainer.catchup import CatchUp
from services.drainer.errors import SinkError
from services.drainer.item import PulledBinlogItem
from services.drainer.progress import Checkpointer
from tributary.change import RowKind, Txn
from tributary.sinks import Pipelined, Sink
from tributary.sinks import SinkError as DownstreamError

log = logging.getLogger(__name__)

BATCH_ROWS = 960  # tidb-binlog: txn-batch 20 x worker-count 16 x 3
SAFE_MODE_WINDOW = 300.0  # seconds of forced safe mode after a start
RETRY_BACKOFF_MAX = 30.0


def weight(txn: Txn) -> int:
    """What a transaction costs in the buffer: its rows; a DDL or a marker counts one."""
    return max(len(txn.rows), 1)


def _ignore(_: float) -> None:
    pass


class EventCounts:
    """Row changes by kind and DDLs the sink accepted (tidb-binlog's ``event{type}``)."""

    __slots__ = ("ddl", "delete", "insert", "update")

    def __init__(self) -> None:
        self.insert = self.update = self.delete = self.ddl = 0

    def add(self, applied: list[Txn]) -> None:
        """Count the transactions of one applied batch (markers count nothing)."""
        insert = update = delete = 0
        for t in applied:
            if t.ddl is not None:
                self.ddl += 1
            for r in t.rows:
                if r.kind is RowKind.INSERT:
                    insert += 1
                elif r.kind is RowKind.UPDATE:
                    update += 1
                else:
                    delete += 1
        self.insert += insert
        self.update += update
        self.delete += delete


def compact(batch: list[Txn]) -> list[Txn]:
    """``batch`` without the markers that another transaction follows.

    Example (M = marker, T = rows): [M5, T7, M9, M12] -> [T7, M12]; [M5, M9] -> [M9].
    """
    kept = [t for t in batch[:-1] if t.rows or t.ddl is not None]
    kept.append(batch[-1])
    return kept


class _Buffer:
    """Converted transactions waiting for the sink, bounded by their total weight."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._txns: deque[tuple[Txn, int]] = deque()  # (txn, merged binlogs it stands for)
        self._weight = 0
        self._error: BaseException | None = None  # raised by ``take`` once the buffer is empty
        self._changed = asyncio.Condition()

    def __len__(self) -> int:
        return len(self._txns)

    async def put(self, txn: Txn, items: int = 1) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self._weight < self._capacity)
            self._txns.append((txn, items))
            self._weight += weight(txn)
            self._changed.notify_all()

    async def fail(self, error: BaseException) -> None:
        """What came before is still taken; then ``take`` raises ``error``."""
        async with self._changed:
            self._error = error
            self._changed.notify_all()

    async def take(self, limit: int) -> tuple[list[Txn], int]:
        """At least one transaction, and more while their weight stays within ``limit``; and
        how many merged binlogs they stand for."""
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._txns) or self._error is not None)
            if not self._txns:
                assert self._error is not None
                raise self._error
            first, items = self._txns.popleft()
            batch, total = [first], weight(first)
            while self._txns and total + weight(self._txns[0][0]) <= limit:
                txn, n = self._txns.popleft()
                total += weight(txn)
                items += n
                batch.append(txn)
            self._weight -= total
            self._changed.notify_all()
            return batch, items


class Syncer:
    def __init__(
        self,
        queue: asyncio.Queue[PulledBinlogItem],
        sink: Sink,
        checkpointer: Checkpointer,
        convert: Callable[[PulledBinlogItem], Awaitable[Txn]],
        *,
        batch_rows: int = BATCH_ROWS,
        safe_mode: bool = False,
        safe_mode_window: float = SAFE_MODE_WINDOW,
        clock: Callable[[], float] = time.monotonic,
        catchup: CatchUp | None = None,
        observe_execute: Callable[[float], None] = _ignore,
    ) -> None:
        self._queue = queue
        self.catchup = catchup
        self._sink = sink
        self._checkpointer = checkpointer
        self._convert = convert
        self._batch_rows = batch_rows
        self._buffer = _Buffer(4 * batch_rows)
        self._safe_mode = safe_mode
        self._clock = clock
        self._safe_until = clock() + safe_mode_window
        self.applied = 0  # binlogs with rows or a DDL the sink accepted
        self.rows = 0  # row changes the sink accepted
        self.batches = 0
        self.fakes = 0  # fake, filtered and ignored binlogs passed over
        self.events = EventCounts()
        self._observe_execute = observe_execute  # seconds of each accepted sink.apply
        self.last_apply = clock()  # when the sink last accepted rows or a DDL (start time before)
        self._put_ts = checkpointer.applied_ts  # commit ts of the last transaction buffered
        self._advanced = asyncio.Event()  # set whenever the checkpoint moved
        # batches a pipelined sink took and has not acknowledged yet: (batch, buffered
        # transactions taken, merged binlogs), in order; the checkpoint waits for them
        self._unacked: deque[tuple[list[Txn], int, int]] = deque()

    def queue_sizes(self) -> tuple[int, int]:
        """Merged binlogs waiting for conversion, and converted transactions buffered."""
        return self._queue.qsize(), len(self._buffer)

    @property
    def safe_mode(self) -> bool:
        return self._safe_mode or self._clock() < self._safe_until

    async def run(self) -> NoReturn:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._converting(), name="drainer-convert")
            tg.create_task(self._applying(), name="drainer-apply")
        raise AssertionError("the syncer's duties never return")

    async def _converting(self) -> None:
        """Convert until a binlog cannot be; what came before it is still applied."""
        while True:
            item = await self._queue.get()
            try:
                txn = await self._convert(item)
                if self.catchup is not None and self.catchup.should_start(txn):
                    await self._catch_up(self.catchup, txn)
                    continue
            except Exception as e:
                await self._buffer.fail(e)
                return
            await self._put(txn)

    async def _put(self, txn: Txn, items: int = 1) -> None:
        await self._buffer.put(txn, items)
        self._put_ts = txn.commit_ts

    async def _settled(self) -> None:
        """Wait until everything buffered so far was applied (the sink checkpoint is there)."""
        while self._checkpointer.applied_ts < self._put_ts:
            self._advanced.clear()
            await self._advanced.wait()

    async def _next_txn(self, idle: float) -> Txn | None:
        """The next merged binlog converted, or None after ``idle`` seconds without one."""
        try:
            async with asyncio.timeout(idle):
                item = await self._queue.get()
        except TimeoutError:
            return None
        return await self._convert(item)

    async def _catch_up(self, catchup: CatchUp, first: Txn) -> None:
        """Stage from ``first`` on, run the job, then buffer the range's marker and the
        transaction that ended the range; the checkpoint moves only when the sink applied
        the marker."""
        catchup.begin()
        try:
            await self._settled()
            staged = await catchup.stage(self._checkpointer.applied_ts, first, self._next_txn)
        except Exception as e:
            catchup.failed(f"staging failed: {e}")
            raise
        if staged.info is None:
            catchup.skipped()
            if staged.consumed:  # markers only: they still move the checkpoint
                await self._put(Txn(staged.last_ts), staged.consumed)
        else:
            await catchup.execute(staged.info)
            catchup.finishing()
            await self._put(Txn(staged.info.end_ts), staged.consumed)
            await self._settled()
            self.rows += staged.info.rows
            self.last_apply = self._clock()
            catchup.done(staged.info.rows)
        if staged.held is not None:
            await self._put(staged.held)

    async def _applying(self) -> NoReturn:
        pipelined = self._sink if isinstance(self._sink, Pipelined) else None
        while True:
            if pipelined is not None and self._unacked and not self._buffer:
                await self._deliver(pipelined.flush)  # nothing to send meanwhile: the acks
                await self._release()
            batch, items = await self._buffer.take(self._batch_rows)
            todo = compact(batch)
            if pipelined is None:
                await self._deliver(partial(self._sink.apply, todo), todo)
                self._accepted(todo, len(batch), items)
                continue
            self._unacked.append((todo, len(batch), items))
            await self._deliver(partial(pipelined.submit, todo))
            await self._release()

    async def _release(self) -> None:
        """Account for the submitted batches the sink's checkpoint passed (acknowledged)."""
        acked = await self._sink.checkpoint()
        while self._unacked and acked is not None and self._unacked[0][0][-1].commit_ts <= acked:
            self._accepted(*self._unacked.popleft())

    def _accepted(self, todo: list[Txn], taken: int, items: int) -> None:
        """The sink holds ``todo`` (``taken`` buffered transactions, ``items`` merged binlogs)."""
        real = [t for t in todo if t.rows or t.ddl is not None]
        self.applied += len(real)
        self.fakes += taken - len(real)
        self.rows += sum(len(t.rows) for t in real)
        self.events.add(real)
        self.batches += 1
        if real:
            self.last_apply = self._clock()
        self._checkpointer.advance(todo[-1].commit_ts)
        self._advanced.set()
        for _ in range(items):
            self._queue.task_done()

    async def _deliver(
        self, attempt: Callable[[], Awaitable[None]], batch: list[Txn] | None = None
    ) -> None:
        """``attempt()``, then on a retriable error ``sink.apply`` with backoff until it passes:
        of ``batch``, or (pipelined) of every transaction submitted and not acknowledged yet,
        which the sink trims to what its checkpoint does not cover."""
        delay = 0.5
        while True:
            self._sink.safe_mode = self.safe_mode
            start = time.perf_counter()
            try:
                await attempt()
                self._observe_execute(time.perf_counter() - start)
                return
            except DownstreamError as e:
                todo = batch if batch is not None else [t for b in self._unacked for t in b[0]]
                span = f"commit ts {todo[0].commit_ts}..{todo[-1].commit_ts}"
                if not e.retriable:
                    raise SinkError(f"the sink refused the batch {span}: {e}") from e
                log.warning(
                    "sink unavailable for the batch %s (retrying in %.1f s): %s", span, delay, e
                )
                attempt = partial(self._sink.apply, todo)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_BACKOFF_MAX)

    async def drain(self, timeout: float) -> bool:  # noqa: ASYNC109 (a deadline, not a call timeout)
        """Wait until every queued binlog was applied; False if ``timeout`` s passed first, or
        at once while a catch-up holds the stream (nothing queued is applied before its job
        ends, and the stop ends the job)."""
        if self.catchup is not None and self.catchup.holds_stream:
            log.info("%d merged binlogs wait for the catch-up: not applied", self._queue.qsize())
            return False
        try:
            async with asyncio.timeout(timeout):
                await self._queue.join()
        except TimeoutError:
            log.warning("%d merged binlogs not applied at shutdown", self._queue.qsize())
            return False
        return True

    def synced(self, check_time: float) -> bool:
        """Nothing queued and nothing applied for ``check_time`` seconds (caught up)."""
        idle = self._queue.empty() and not self._buffer
        return idle and self._clock() - self.last_apply >= check_time
