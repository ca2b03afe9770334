"""A processor: replicates the spans of one changefeed held by its capture into the sink.

Spans (``spanbook``): a whole changefeed is the one span ``*``; a spread one gives this
processor some of its tables and maybe ``#ddl``. The reader starts at the lowest span
checkpoint and each span takes what comes after its own (``SpanBook.keep``).

It opens the sink, opens the source at the changefeed status's ``source-position`` (with
``last_ts`` = the status checkpoint, so replayed transactions get the ts they had), and applies
batches of whole transactions. After each batch the sink has moved its own checkpoint; the
processor then exposes ``(checkpoint_ts, position)`` for the manager to write into the status.

At-least-once, made harmless: the status is written only after the sink applied, so a new
processor (after a crash or a move) resumes at or before what the sink holds, and the sink
drops every transaction at or below its own checkpoint (``sinks.pending``). Example:
status says ts 100 @ ``bin.1:900``, the sink applied up to 130 before the old capture died;
the new processor re-reads 110, 120, 130 (same ts), the sink drops them and applies 140 on.

A pipelined sink (``tributary.sinks.Pipelined``: the storage sink, which writes files every
``flush-interval``) takes batches with ``submit`` and makes them durable later; each batch then
waits (``acks``) until the sink's checkpoint reaches it, and only then do the spans move past
it, so the status never names a transaction the sink could still lose. While the reader has
nothing new the processor looks at that checkpoint every ``ack_poll`` seconds; before a
barrier, a sync point or the end at target ts it has the sink write everything (``flush``).

Resolved ts: the source's resolved items (an idle upstream) move ``checkpoint_ts`` and
``position`` without a sink write; a resume from there is safe because no later transaction
can get a ts at or below the marker's (``services.capture.source``).

Event filters (``eventfilter``) drop rows and DDL before the sink; ``memory-quota`` bounds the
bytes read ahead of the sink (``readahead``).

Target ts: transactions after ``target-ts`` are never applied; the first one seen ends the
run with the checkpoint at ``target-ts`` (``finished``).

Spread changefeeds (several processors on several captures write one downstream):

* the sink checkpoint row is this run's own (the changefeed, and a random run id): another
  run's row may be ahead of a span that just joined, and the sink would drop its rows;
  so replays are not dropped by the sink but made harmless by safe mode, on from the start
  until the reader passes the upstream's binlog end as it was when the run started (a span's
  old capture stopped before this run started, so it applied nothing after that end);
* a DDL is a barrier of the whole changefeed: the spans here stop at ``ts - 1``; the
  processor holding ``#ddl`` waits until every other span has reached ``ts - 1`` (their
  checkpoints in etcd, handed in by ``observe``), applies the DDL and moves on; the others
  wait until ``#ddl`` has reached ``ts``. So every row before a DDL is downstream before it,
  and every row after it after it, whatever captures the tables run on (a RENAME or DROP of
  several tables included). The cost: each DDL pauses the changefeed for a few checkpoint
  flushes.

Lease fence (``fence``): ``gate`` is the capture's ``LeaseFence.check``. The sink asks it right
before each downstream write starts (``sinks.port.GatesWrites``; the MySQL sink: statements,
COMMIT, DDL, checkpoint save) and the processor before each batch it hands to a sink that does
not; a refusal (``WriteRefused``) is no error of the changefeed: the processor waits and tries
again, and the manager stops it meanwhile. The DDL holder also waits, before applying a DDL,
until etcd has its own ``#ddl`` checkpoint at ``ts - 1``: if it is cut off right after the DDL,
the capture taking ``#ddl`` over resumes there, with every row before the DDL applied, and
hands the DDL over again (the sink skips it by its DDL record, keyed by the changefeed for
every run, or by error code) instead of replaying rows of the old schema into the new one.

Sync points (``enable-sync-point``, ``tributary.cdc.syncpoint``): a point ``S`` is due at the
first item read above it. The processor applies everything before that item (all <= ``S``)
and moves its spans to ``S`` (with the position after the last item: a valid resume point, as
the next item's ts is above ``S``); then:

* a whole changefeed's processor writes the point (``sinks.syncpoints``) and goes on;
* in a spread one, the processor holding ``#ddl`` waits until every other span has reached
  ``S`` in etcd, writes the point and goes on; the others wait until ``#ddl`` is past ``S``
  in etcd. No span passes ``S`` before ``#ddl`` does, and ``#ddl`` passes it only after the
  write: while the point is written the downstream holds exactly the upstream's transactions
  <= ``S``, on every capture. A processor that starts again at ``S`` (a retry, a move) does it
  again: the store keeps the first row of a point. The cost: each point pauses the changefeed
  for a few checkpoint flushes, as a DDL does.

Several points between two items (an idle stretch) are one barrier, at the last of them, and one
write of a row each (they all see the same downstream). With ``target-ts``, the points up to it
are written before the run ends.

Errors: a retriable failure (sink or source) is reported in ``error`` and retried with
exponential backoff; a non-retriable one is reported and ends the run (the owner then marks
the changefeed failed).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, replace

from services.capture.acks import Acks, Submitted
from services.capture.eventfilter import EventFilter
from services.capture.readahead import ReadAhead, txn_bytes
from services.capture.rules import table_filter
from services.capture.source import ChangeSource, SourceItem
from services.capture.spanbook import SpanBook, SpanMark
from tributary.cdc.errors import CaptureError
from tributary.cdc.keys import FeedId
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus, RunningError, now_text
from tributary.cdc.spans import DDL_SPAN, WHOLE_SPAN
from tributary.cdc.syncpoint import SECOND_NS, Schedule
from tributary.change import Txn
from tributary.sinks import (
    GatesWrites,
    Pipelined,
    Sink,
    SinkError,
    SinkOptions,
    WriteGate,
    WriteRefused,
)
from tributary.sinks.syncpoints import SyncPointOptions, SyncPointStore

log = logging.getLogger(__name__)

SinkOpener = Callable[[str, SinkOptions], AbstractAsyncContextManager[Sink]]
SyncPointOpener = Callable[[str, SyncPointOptions], AbstractAsyncContextManager[SyncPointStore]]
_END = object()
Queue = asyncio.Queue[SourceItem | BaseException | object]


def sink_checkpoint_id(cluster: str, info: ChangeFeedInfo) -> int:
    """The key of this changefeed's checkpoint row in its downstream: stable across moves and
    restarts, distinct for a changefeed re-created under the same name (its create time)."""
    text = f"{cluster}/{info.namespace}/{info.changefeed_id}/{info.create_time}"
    return _key(text)


def run_checkpoint_id(cluster: str, info: ChangeFeedInfo) -> int:
    """A spread changefeed's processor run's own checkpoint row (see the module's doc)."""
    feed = f"{cluster}/{info.namespace}/{info.changefeed_id}/{info.create_time}"
    return _key(f"{feed}/{uuid.uuid4()}")


def _key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest()) >> 1


@dataclass(frozen=True, slots=True)
class ProcessorOptions:
    batch_txns: int = 256  # transactions per sink batch at most
    queue_txns: int = 1024  # transactions read ahead of the sink
    backoff_min: float = 0.5  # seconds before the first retry
    backoff_max: float = 10.0
    ack_poll: float = 0.2  # seconds between looks at a pipelined sink's checkpoint when idle


class Processor:
    def __init__(
        self,
        cluster: str,
        address: str,
        feed: FeedId,
        info: ChangeFeedInfo,
        status: ChangeFeedStatus,
        source: ChangeSource,
        open_sink: SinkOpener,
        options: ProcessorOptions = ProcessorOptions(),
        *,
        spans: Mapping[str, SpanMark] | None = None,
        tables: frozenset[str] = frozenset(),
        gate: WriteGate | None = None,
        sync_points: SyncPointOpener | None = None,
    ) -> None:
        self.feed = feed
        self._gate = gate
        self._sync_points = sync_points
        config = info.config
        self._schedule = (
            Schedule.every(config.sync_point_interval) if config.enable_sync_point else None
        )
        self._next_point = 0  # the first sync point not passed yet
        self.info = info
        self._cluster = cluster
        self._address = address
        self._source = source
        self._open_sink = open_sink
        self._options = options
        if spans is None:
            spans = {WHOLE_SPAN: SpanMark(status.checkpoint_ts, status.source_position)}
        self.book = SpanBook(spans, tables)
        self._last_position = self.book.low().position  # after the last item taken
        self._observed: dict[str, int] = {}  # every span's checkpoint in etcd
        self._seen = asyncio.Event()
        self._safe_until: str | None = None  # safe mode until the reader passes this position
        self.resolved_ts = self.checkpoint_ts  # the highest ts read from the source
        self.last_synced_ts = 0  # commit ts of the last transaction that changed the sink
        self.error: RunningError | None = None
        self.finished = False
        self.applied_txns = 0
        self.applied_rows = 0
        self.errors = 0  # errors met since it started (each retried unless fatal)
        self._pipelined: Pipelined | None = None  # the sink, when it is pipelined
        self._acks = Acks()  # batches submitted to it and not durable yet
        self._sink_checkpoint: Callable[[], Awaitable[int | None]] | None = None

    @property
    def checkpoint_ts(self) -> int:
        return self.book.low().checkpoint_ts

    @property
    def position(self) -> str:
        return self.book.low().position

    def observe(self, checkpoints: Mapping[str, int]) -> None:
        """The changefeed's spans' checkpoints as etcd has them (the DDL barrier's input)."""
        self._observed = dict(checkpoints)
        self._seen.set()

    async def run(self) -> None:
        """Replicate until finished, a non-retriable error, or cancellation."""
        delay = self._options.backoff_min
        while True:
            try:
                await self._run_once()
                return
            except WriteRefused as e:  # the lease fence fell: the manager stops us
                log.info("changefeed %s: processor fenced: %s", self.feed, e)
            except (CaptureError, SinkError) as e:
                self._report(e, e.retriable)
                if not e.retriable:
                    return
            except Exception as e:  # an unexpected failure: report it, keep the capture alive
                log.exception("changefeed %s: processor failed", self.feed)
                self._report(e, True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._options.backoff_max)

    def _report(self, e: BaseException, retriable: bool) -> None:
        self.errors += 1
        log.warning(
            "changefeed %s: %s error: %s", self.feed, "retriable" if retriable else "fatal", e
        )
        code = "CDC:ErrProcessorRetriable" if retriable else "CDC:ErrProcessorFatal"
        self.error = RunningError(
            f"{type(e).__name__}: {e}", code, self._address, now_text(), retriable
        )

    async def _run_once(self) -> None:
        info, book = self.info, self.book
        spread = not book.whole
        key = (run_checkpoint_id if spread else sink_checkpoint_id)(self._cluster, info)
        ddl_key = sink_checkpoint_id(self._cluster, info)  # one DDL record for every run
        flt = table_filter(info.config.filter_rules)
        events = EventFilter(info.config.event_filters)
        self._safe_until = await self._source.current_position() if spread else None
        async with (
            self._open_sink(
                info.sink_uri, SinkOptions(key, ddl_key=ddl_key, cluster_name=self._cluster)
            ) as sink,
            self._open_store() as store,
        ):
            if isinstance(sink, GatesWrites):
                sink.write_gate = self._gate
            self._pipelined = sink if isinstance(sink, Pipelined) else None
            self._sink_checkpoint = sink.checkpoint
            self._acks = Acks()  # a new sink: nothing submitted to it yet
            if store is not None:
                store.write_gate = self._gate
            low = book.low()
            if self._schedule is not None:
                self._next_point = self._schedule.first_at_or_after(low.checkpoint_ts)
            log.info(
                "changefeed %s: replicating %s from %s (checkpoint %d) into the sink",
                self.feed,
                ", ".join(sorted(book.marks)),
                low.position or "the start",
                low.checkpoint_ts,
            )
            self._last_position = low.position
            async with self._source.open(low.position, low.checkpoint_ts, flt) as stream:
                queue: Queue = asyncio.Queue(self._options.queue_txns)
                budget = ReadAhead(info.config.memory_quota)
                sizes: collections.deque[int] = collections.deque()
                read = self._read(stream, queue, budget, sizes)
                reader = asyncio.create_task(read, name=f"read-{self.feed}")
                try:
                    await self._apply(sink, store, queue, events, budget, sizes)
                finally:
                    reader.cancel()
                    await asyncio.gather(reader, return_exceptions=True)

    async def _read(
        self,
        stream: AsyncIterator[SourceItem],
        queue: Queue,
        budget: ReadAhead,
        sizes: collections.deque[int],
    ) -> None:
        try:
            async for item in stream:
                size = txn_bytes(item.txn)
                await budget.take(size)
                self.resolved_ts = max(self.resolved_ts, item.txn.commit_ts)
                sizes.append(size)
                await queue.put(item)
        except Exception as e:  # handed to the applier, which raises it in the processor
            await queue.put(e)
            return
        await queue.put(_END)

    def _open_store(self) -> AbstractAsyncContextManager[SyncPointStore | None]:
        """The sync point store, for the processor that writes the points: the one holding
        ``#ddl`` (or ``*``) of a changefeed with sync points on."""
        config = self.info.config
        if self._schedule is None or not self.book.has_ddl:
            return nullcontext(None)
        if self._sync_points is None:
            raise CaptureError("sync points are on but no store can be opened", retriable=False)
        retention = config.sync_point_retention / SECOND_NS
        options = SyncPointOptions(self._cluster, self.feed.id, retention)
        return self._sync_points(self.info.sink_uri, options)

    async def _apply(
        self,
        sink: Sink,
        store: SyncPointStore | None,
        queue: Queue,
        events: EventFilter,
        budget: ReadAhead,
        sizes: collections.deque[int],
    ) -> None:
        target = self.info.target_ts
        ignored = frozenset(self.info.config.ignore_txn_start_ts)
        while True:
            batch: list[SourceItem] = []
            taken = 0
            item = await self._next(queue)
            while True:
                if isinstance(item, BaseException):
                    raise item
                if not isinstance(item, SourceItem):
                    raise CaptureError("the upstream source ended", retriable=True)
                taken += sizes.popleft()
                ts = item.txn.commit_ts
                if target and ts > target:
                    await self._commit(sink, batch)
                    await self._settle()
                    await self._sync_points_before(store, target + 1, finishing=True)
                    self._finish(target)
                    return
                if self._schedule is not None and ts > self._next_point:
                    await self._commit(sink, batch)
                    await self._settle()
                    batch = []
                    await self._sync_points_before(store, ts)
                if item.txn.start_ts in ignored:
                    item = self._skip(item)
                elif events and not item.resolved:
                    item = replace(item, txn=events.apply(item.txn))
                if self._is_barrier(item):
                    await self._commit(sink, batch)
                    await self._settle()
                    batch = []
                    await self._barrier(sink, item)
                else:
                    batch.append(item)
                if len(batch) >= self._options.batch_txns or queue.empty():
                    break
                item = queue.get_nowait()
            await self._commit(sink, batch)
            await budget.give(taken)

    @staticmethod
    def _skip(item: SourceItem) -> SourceItem:
        """An ignored transaction (``ignore-txn-start-ts``) as a checkpoint-only marker."""
        return SourceItem(Txn(item.txn.commit_ts, item.txn.start_ts), item.position)

    def _is_barrier(self, item: SourceItem) -> bool:
        return (
            not self.book.whole
            and item.txn.ddl is not None
            and not item.resolved
            and self.book.behind(item.txn.commit_ts)
        )

    async def _barrier(self, sink: Sink, item: SourceItem) -> None:
        """A DDL of a spread changefeed (the module's doc): all before it, it, all after it."""
        ts, book = item.txn.commit_ts, self.book
        book.hold(ts, self._last_position)
        if DDL_SPAN in book.marks:
            log.info("changefeed %s: DDL at %d waits for every table", self.feed, ts)
            await self._wait(lambda: book.others_reached(self._observed, ts - 1))
            if book.marks[DDL_SPAN].checkpoint_ts < ts:
                # our own hold mark in etcd first: a takeover then resumes at the DDL
                await self._wait(lambda: self._observed.get(DDL_SPAN, 0) >= ts - 1)
                self._use_safe_mode(sink)
                self._allow_write(sink)
                await sink.apply([item.txn])
                self._applied_up_to(item.position)
                self.last_synced_ts = ts
        else:
            await self._wait(lambda: self._observed.get(DDL_SPAN, 0) >= ts)
        book.advance(ts, item.position)
        self._last_position = item.position
        self.error = None

    async def _sync_points_before(
        self, store: SyncPointStore | None, before: int, *, finishing: bool = False
    ) -> None:
        """The sync point barrier (the module's doc) for the points below ``before``, with
        everything read before ``before`` applied. ``finishing``: the run ends at target ts,
        so its spans wait for nobody (they apply nothing more)."""
        if self._schedule is None:
            return
        points = self._schedule.due(self._next_point, before)
        self._next_point = self._schedule.first_at_or_after(before)
        if not points:
            return
        last, book = points[-1], self.book
        own = book.marks.get(WHOLE_SPAN if book.whole else DDL_SPAN)
        book.advance(last, self._last_position)  # every span here at the last point
        if own is not None:
            todo = [p for p in points if p >= own.checkpoint_ts]  # the rest were written
            if todo and not book.whole:
                # every span's checkpoint in etcd (none seen yet: not a single report so far)
                await self._wait(
                    lambda: bool(self._observed) and book.others_reached(self._observed, last)
                )
            if todo:
                if store is None:
                    raise CaptureError("sync points are on but no store is open", retriable=False)
                await store.write(todo)  # it asks the write gate itself
        elif not finishing:
            log.info("changefeed %s: sync point %d waits for #ddl", self.feed, last)
            await self._wait(lambda: self._observed.get(DDL_SPAN, 0) > last)
        self.error = None

    async def _wait(self, ready: Callable[[], bool]) -> None:
        while not ready():
            self._seen.clear()
            await self._seen.wait()

    def _use_safe_mode(self, sink: Sink) -> None:
        """Safe mode until the reader passes the binlog end seen at the start (spread only):
        what comes before that end may have been applied by the capture that ran these
        tables before, and is replayed idempotently."""
        sink.safe_mode = self._safe_until is not None

    def _allow_write(self, sink: Sink) -> None:
        """The fence, for a sink that does not ask it itself before each write."""
        if self._gate is not None and not isinstance(sink, GatesWrites):
            self._gate()

    def _applied_up_to(self, position: str) -> None:
        """After a write: once everything up to the start's binlog end is applied, safe mode is
        off for what follows. Decided after the write, never for a batch that still holds
        transactions before that end (a batch reaching past it is applied in safe mode)."""
        if self._safe_until is not None and self._source.reached(position, self._safe_until):
            self._safe_until = None
            log.info("changefeed %s: caught up, safe mode off", self.feed)

    async def _commit(self, sink: Sink, batch: list[SourceItem]) -> None:
        if not batch:
            return
        txns = [self.book.keep(i.txn) for i in batch if not i.resolved]
        if txns:  # resolved markers move the checkpoint only: nothing to write downstream
            self._use_safe_mode(sink)
            self._allow_write(sink)
            if self._pipelined is not None:
                await self._pipelined.submit(txns)
            else:
                await sink.apply(txns)
            self._applied_up_to(batch[-1].position)
        self._last_position = batch[-1].position
        changed = [t.commit_ts for t in txns if t.rows or t.ddl is not None]
        done = Submitted(
            txns[-1].commit_ts if txns else None,
            batch[-1].txn.commit_ts,
            batch[-1].position,
            len(txns),
            sum(len(t.rows) for t in txns),
            changed[-1] if changed else None,
        )
        if self._pipelined is None or not (txns or self._acks):
            self._done(done)
        else:  # durable at the sink's next flush: the spans wait for its checkpoint
            self._acks.add(done)
            await self._release()
        self.error = None

    def _done(self, batch: Submitted) -> None:
        """The sink holds ``batch``: the spans move past it."""
        self.book.advance(batch.commit_ts, batch.position)
        self.applied_txns += batch.txns
        self.applied_rows += batch.rows
        if batch.synced is not None:
            self.last_synced_ts = batch.synced

    async def _release(self) -> None:
        """Move the spans past the submitted batches the sink's checkpoint covers."""
        if self._sink_checkpoint is None or not self._acks:
            return
        for batch in self._acks.release(await self._sink_checkpoint()):
            self._done(batch)

    async def _settle(self) -> None:
        """Everything submitted made durable and the spans moved past it (before a barrier,
        a sync point or the end at target ts)."""
        if self._pipelined is not None and self._acks:
            await self._pipelined.flush()
            await self._release()

    async def _next(self, queue: Queue) -> SourceItem | BaseException | object:
        """The next item read; while waiting for one, a pipelined sink's checkpoint is looked
        at every ``ack_poll`` seconds, so the spans follow its flushes on an idle upstream."""
        while self._acks:
            try:
                async with asyncio.timeout(self._options.ack_poll):
                    return await queue.get()
            except TimeoutError:
                await self._release()
        return await queue.get()

    def _finish(self, target: int) -> None:
        self.book.advance(target, self._last_position)
        self.finished = True
        self.error = None
        log.info("changefeed %s: reached target ts %d", self.feed, target)
