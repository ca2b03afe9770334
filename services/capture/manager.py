"""The processor manager: every capture's reactor that runs the spans assigned to it.

Each tick, for every changefeed that runs (normal or warning), has a status, and has a task
position on this capture: the spans assigned here (``replicating``) are claimed, then run by
one ``Processor``; spans the owner asks back (``stopping``) are stopped and released. While
this capture's own registration key is missing (lease lost) nothing runs here: the owner is
moving its spans away.

The move protocol (``tributary.cdc.spans``), this side:

* claim: a span assigned here whose progress names nobody (released), this capture, or a
  capture that is gone gets this capture's id in its progress, in a txn guarded by the
  assignment; it is started on a later tick, once the mirror shows the claim;
* the processor runs the claimed spans; a change of that set (a span claimed or asked back)
  or of the changefeed's ``epoch`` cancels it, and only once it has stopped (no sink write
  can follow) are the spans asked back released: their last checkpoint written with capture
  ``""``. The spans kept start again at once from the stopped processor's checkpoints.

The lease fence (``fence``): while it is down (the capture's lease may expire soon, or is
gone) nothing is claimed or started here, and ``halt`` (called the moment it falls) cancels
every processor; the spans they held are settled as usual once they have stopped.

Progress goes back through patches: each span's checkpoint and position (forward only, at
most once per ``flush_interval``) and the processor's figures (checkpoint, resolved ts, rows,
last synced ts) and errors (at once) into the task position; guarded by this capture's task
key, the info key and the spans' assignments, so a processor whose spans moved writes
nothing. The owner makes the status checkpoint the minimum of the spans'.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from services.capture.processor import Processor
from services.capture.spanbook import SpanMark
from services.capture.state import ClusterState, FeedView
from services.capture.worker import UNCHANGED, Patch, PatchGroup, PatchResult
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.spans import SpanState, TableProgress

log = logging.getLogger(__name__)

ProcessorFactory = Callable[[FeedView, Mapping[str, SpanMark]], Processor]


class Fence(Protocol):
    def is_open(self) -> bool: ...


class _Open:
    def is_open(self) -> bool:
        return True


ALWAYS_OPEN: Fence = _Open()  # no fence (tests of the reactor alone)


class _Running:
    def __init__(self, processor: Processor, task: asyncio.Task[None], epoch: int) -> None:
        self.processor = processor
        self.task = task
        self.epoch = epoch
        self.flushed_at = 0.0

    @property
    def spans(self) -> frozenset[str]:
        return frozenset(self.processor.book.marks)


class ProcessorManager:
    def __init__(
        self,
        keys: Keys,
        capture_id: str,
        make: ProcessorFactory,
        tg: asyncio.TaskGroup,
        *,
        flush_interval: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        fence: Fence = ALWAYS_OPEN,
    ) -> None:
        self._keys = keys
        self._fence = fence
        self._capture_id = capture_id
        self._make = make
        self._tg = tg
        self._flush_interval = flush_interval
        self._monotonic = monotonic
        self.running: dict[FeedId, _Running] = {}
        self._halting: dict[FeedId, _Running] = {}  # cancelled, maybe not stopped yet
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False

    def tick(self, state: ClusterState) -> Sequence[PatchGroup]:
        wanted = self._wanted(state)
        for feed in list(self.running):
            view = wanted.get(feed)
            run = self.running[feed]
            if view is None or view.info is None or view.info.epoch != run.epoch:
                self._stop(feed)
            elif self._claimed(view) != run.spans:
                self._stop(feed)
        groups: list[PatchGroup] = []
        for feed, view in sorted(state.feeds.items(), key=lambda kv: str(kv[0])):
            groups.extend(self._feed(feed, view, state, feed in wanted))
        for feed in [f for f, h in self._halting.items() if f not in state.feeds]:
            if self._halting[feed].task.done():
                del self._halting[feed]
        return groups

    def _wanted(self, state: ClusterState) -> dict[FeedId, FeedView]:
        if self._capture_id not in state.captures or not self._fence.is_open():
            return {}  # our registration is gone or may go soon: we may not run anything
        return {
            feed: view
            for feed, view in state.feeds.items()
            if self._capture_id in view.tasks
            and view.info is not None
            and view.info.state.runs
            and view.status is not None
        }

    def _mine(self, view: FeedView) -> list[str]:
        me = self._capture_id
        return [
            s
            for s, a in view.assign.items()
            if a.capture == me and a.state is SpanState.REPLICATING
        ]

    def _claimed(self, view: FeedView) -> frozenset[str]:
        me = self._capture_id
        return frozenset(
            s
            for s in self._mine(view)
            if (p := view.progress.get(s)) is not None and p.capture == me
        )

    def _feed(
        self, feed: FeedId, view: FeedView, state: ClusterState, wanted: bool
    ) -> list[PatchGroup]:
        halted = self._halting.get(feed)
        marks: Mapping[str, SpanMark] = {}
        if halted is not None:
            if not halted.task.done():
                return []  # its sink may still write: nothing moves before it has stopped
            del self._halting[feed]
            if view.info is not None and view.info.epoch == halted.epoch:
                marks = halted.processor.book.marks
        if feed not in self.running:
            settled = self._settle(view, marks)
            if settled:
                return settled  # start again once the mirror shows it
        if not wanted:
            return []
        groups = self._claim(view, state)
        claimed = self._claimed(view)
        if feed not in self.running and claimed and not self._closed and self._fence.is_open():
            self._start(view, claimed)
        return groups + self._report(feed, view)

    def _claim(self, view: FeedView, state: ClusterState) -> list[PatchGroup]:
        me, keys = self._capture_id, self._keys
        groups = []
        for span in self._mine(view):
            p = view.progress.get(span)
            if p is None or p.capture == me:
                continue
            if p.capture and p.capture in state.captures:
                continue  # its old capture has not released it yet
            claim = replace(p, capture=me).to_json()

            def set_claim(old: bytes | None, claim: bytes = claim) -> PatchResult:
                return claim if old is not None else UNCHANGED

            groups.append(
                PatchGroup(
                    (Patch(keys.progress_key(view.feed, span), set_claim),),
                    reads=(keys.table_key(view.feed, span), keys.task_key(me, view.feed)),
                )
            )
            log.info("changefeed %s: table %s claimed by capture %s", view.feed, span, me)
        return groups

    def _start(self, view: FeedView, spans: frozenset[str]) -> None:
        assert view.info is not None
        start = {
            s: SpanMark(view.progress[s].checkpoint_ts, view.progress[s].source_position)
            for s in spans
        }
        processor = self._make(view, start)
        task = self._tg.create_task(processor.run(), name=f"processor-{view.feed}")
        self.running[view.feed] = _Running(processor, task, view.info.epoch)
        log.info(
            "changefeed %s: processor started on capture %s for %s",
            view.feed,
            self._capture_id,
            ", ".join(sorted(spans)),
        )

    def _settle(self, view: FeedView, marks: Mapping[str, SpanMark]) -> list[PatchGroup]:
        """With no processor running the changefeed here: write the last checkpoints of the
        one that stopped (``marks``), and release the spans asked back from here."""
        me, keys = self._capture_id, self._keys
        patches = []
        for span, p in sorted(view.progress.items()):
            if p.capture != me:
                continue
            a = view.assign.get(span)
            kept = a is not None and a.capture == me and a.state is SpanState.REPLICATING
            mark = marks.get(span)
            last = p if kept else replace(p, capture="")
            if mark is not None and mark.checkpoint_ts > p.checkpoint_ts:
                last = TableProgress(mark.checkpoint_ts, mark.position, last.capture)
            if last == p:
                continue

            def settle(old: bytes | None, last: TableProgress = last) -> PatchResult:
                if old is None or TableProgress.from_json(old).capture != me:
                    return UNCHANGED
                return last.to_json()

            patches.append(Patch(keys.progress_key(view.feed, span), settle))
            if not kept:
                log.info(
                    "changefeed %s: table %s released by capture %s at %d",
                    view.feed,
                    span,
                    me,
                    last.checkpoint_ts,
                )
        return [PatchGroup(tuple(patches))] if patches else []

    def _report(self, feed: FeedId, view: FeedView) -> list[PatchGroup]:
        run = self.running.get(feed)
        if run is None or view.status is None:
            return []
        p = run.processor
        p.observe(
            {s: (pr.checkpoint_ts if (pr := view.progress.get(s)) else 0) for s in view.assign}
        )
        keys, me = self._keys, self._capture_id
        task_key = keys.task_key(me, feed)
        info_key = keys.info_key(feed)
        task = view.tasks[me]
        now = self._monotonic()
        due = p.finished or now - run.flushed_at >= self._flush_interval
        progress = replace(
            task,
            error=p.error,
            checkpoint_ts=p.checkpoint_ts,
            resolved_ts=p.resolved_ts,
            count=p.applied_rows,
            last_synced_ts=max(task.last_synced_ts, p.last_synced_ts),
        )
        patches: list[Patch] = []
        if task.error != p.error or (due and progress != task):

            def set_task(old: bytes | None) -> PatchResult:
                if old is None:
                    return UNCHANGED
                return progress.to_json()

            patches.append(Patch(task_key, set_task))
        reads = [task_key, info_key]
        if due:
            for span, mark in sorted(p.book.marks.items()):
                known = view.progress.get(span)
                if known is None or mark.checkpoint_ts <= known.checkpoint_ts:
                    continue
                patches.append(Patch(keys.progress_key(feed, span), _advance(mark, me)))
                reads.append(keys.table_key(feed, span))
        if not patches:
            return []
        if due:
            run.flushed_at = now
        return [PatchGroup(tuple(patches), reads=tuple(reads))]

    def _stop(self, feed: FeedId) -> None:
        run = self.running.pop(feed)
        run.task.cancel()
        self._halting[feed] = run
        self._stopping.add(run.task)
        run.task.add_done_callback(self._stopping.discard)
        log.info("changefeed %s: processor stopped on capture %s", feed, self._capture_id)

    def halt(self) -> None:
        """The lease fence fell: cancel every processor now, without waiting for a tick (their
        sinks refuse to start a write already; this ends the ones waiting or reading)."""
        for feed in list(self.running):
            self._stop(feed)

    async def close(self) -> None:
        """Cancel every processor and wait until they have stopped. No processor starts after
        this: the reactor may still tick until its loop is cancelled, and a processor it
        started then would keep the capture's task group open."""
        self._closed = True
        for feed in list(self.running):
            self._stop(feed)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)


def _advance(mark: SpanMark, me: str) -> Callable[[bytes | None], PatchResult]:
    def fn(old: bytes | None) -> PatchResult:
        if old is None:
            return UNCHANGED
        known = TableProgress.from_json(old)
        if known.capture != me or mark.checkpoint_ts <= known.checkpoint_ts:
            return UNCHANGED
        return TableProgress(mark.checkpoint_ts, mark.position, me).to_json()

    return fn
