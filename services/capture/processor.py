"""A processor: replicates one changefeed from the upstream source into its sink.

It opens the sink, opens the source at the changefeed status's ``source-position`` (with
``last_ts`` = the status checkpoint, so replayed transactions get the ts they had), and applies
batches of whole transactions. After each batch the sink has moved its own checkpoint; the
processor then exposes ``(checkpoint_ts, position)`` for the manager to write into the status.

At-least-once, made harmless: the status is written only after the sink applied, so a new
processor (after a crash or a move) resumes at or before what the sink holds, and the sink
drops every transaction at or below its own checkpoint (``sinks.pending``). Example:
status says ts 100 @ ``bin.1:900``, the sink applied up to 130 before the old capture died;
the new processor re-reads 110, 120, 130 (same ts), the sink drops them and applies 140 on.

Resolved ts: the source's resolved items (an idle upstream) move ``checkpoint_ts`` and
``position`` without a sink write; a resume from there is safe because no later transaction
can get a ts at or below the marker's (``services.capture.source``).

Event filters (``eventfilter``) drop rows and DDL before the sink; ``memory-quota`` bounds the
bytes read ahead of the sink (``readahead``).

Target ts: transactions after ``target-ts`` are never applied; the first one seen ends the
run with the checkpoint at ``target-ts`` (``finished``).

Errors: a retriable failure (sink or source) is reported in ``error`` and retried with
exponential backoff; a non-retriable one is reported and ends the run (the owner then marks
the changefeed failed).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace

from services.capture.eventfilter import EventFilter
from services.capture.readahead import ReadAhead, txn_bytes
from services.capture.rules import table_filter
from services.capture.source import ChangeSource, SourceItem
from tributary.cdc.errors import CaptureError
from tributary.cdc.keys import FeedId
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus, RunningError, now_text
from tributary.change import Txn
from tributary.sinks import Sink, SinkError, SinkOptions

log = logging.getLogger(__name__)

SinkOpener = Callable[[str, SinkOptions], AbstractAsyncContextManager[Sink]]
_END = object()
Queue = asyncio.Queue[SourceItem | BaseException | object]


def sink_checkpoint_id(cluster: str, info: ChangeFeedInfo) -> int:
    """The key of this changefeed's checkpoint row in its downstream: stable across moves and
    restarts, distinct for a changefeed re-created under the same name (its create time)."""
    text = f"{cluster}/{info.namespace}/{info.changefeed_id}/{info.create_time}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest()) >> 1


@dataclass(frozen=True, slots=True)
class ProcessorOptions:
    batch_txns: int = 256  # transactions per sink batch at most
    queue_txns: int = 1024  # transactions read ahead of the sink
    backoff_min: float = 0.5  # seconds before the first retry
    backoff_max: float = 10.0


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
    ) -> None:
        self.feed = feed
        self.info = info
        self._cluster = cluster
        self._address = address
        self._source = source
        self._open_sink = open_sink
        self._options = options
        self.checkpoint_ts = status.checkpoint_ts
        self.position = status.source_position
        self.resolved_ts = status.checkpoint_ts  # the highest ts read from the source
        self.last_synced_ts = 0  # commit ts of the last transaction that changed the sink
        self.error: RunningError | None = None
        self.finished = False
        self.applied_txns = 0
        self.applied_rows = 0
        self.errors = 0  # errors met since it started (each retried unless fatal)

    async def run(self) -> None:
        """Replicate until finished, a non-retriable error, or cancellation."""
        delay = self._options.backoff_min
        while True:
            try:
                await self._run_once()
                return
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
        info = self.info
        options = SinkOptions(sink_checkpoint_id(self._cluster, info))
        flt = table_filter(info.config.filter_rules)
        events = EventFilter(info.config.event_filters)
        async with self._open_sink(info.sink_uri, options) as sink:
            log.info(
                "changefeed %s: replicating from %s (checkpoint %d) into the sink",
                self.feed,
                self.position or "the start",
                self.checkpoint_ts,
            )
            async with self._source.open(self.position, self.checkpoint_ts, flt) as stream:
                queue: Queue = asyncio.Queue(self._options.queue_txns)
                budget = ReadAhead(info.config.memory_quota)
                sizes: collections.deque[int] = collections.deque()
                read = self._read(stream, queue, budget, sizes)
                reader = asyncio.create_task(read, name=f"read-{self.feed}")
                try:
                    await self._apply(sink, queue, events, budget, sizes)
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

    async def _apply(
        self,
        sink: Sink,
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
            item = await queue.get()
            while True:
                if isinstance(item, BaseException):
                    raise item
                if not isinstance(item, SourceItem):
                    raise CaptureError("the upstream source ended", retriable=True)
                taken += sizes.popleft()
                if target and item.txn.commit_ts > target:
                    await self._commit(sink, batch)
                    self._finish(target)
                    return
                if item.txn.start_ts in ignored:
                    item = self._skip(item)
                elif events and not item.resolved:
                    item = replace(item, txn=events.apply(item.txn))
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

    async def _commit(self, sink: Sink, batch: list[SourceItem]) -> None:
        if not batch:
            return
        txns = [i.txn for i in batch if not i.resolved]
        if txns:  # resolved markers move the checkpoint only: nothing to write downstream
            await sink.apply(txns)
        self.checkpoint_ts = batch[-1].txn.commit_ts
        self.position = batch[-1].position
        self.applied_txns += len(txns)
        self.applied_rows += sum(len(t.rows) for t in txns)
        changed = [t.commit_ts for t in txns if t.rows or t.ddl is not None]
        if changed:
            self.last_synced_ts = changed[-1]
        self.error = None

    def _finish(self, target: int) -> None:
        self.checkpoint_ts = max(self.checkpoint_ts, target)
        self.finished = True
        self.error = None
        log.info("changefeed %s: reached target ts %d", self.feed, target)
