"""The processor manager: every capture's reactor that runs the changefeeds placed on it.

Each tick: a changefeed whose task position key names this capture, whose info says it runs
(normal or warning) and whose status exists gets a ``Processor``; one that lost any of these
(moved, paused, removed, finished, failed) or whose ``epoch`` changed (resumed, updated) has its
processor cancelled. While this capture's own registration key is missing (lease lost) nothing
runs here: the owner is moving its changefeeds away.

Progress goes back through patches: the status's ``checkpoint-ts`` and ``source-position``
(forward only, at most once per ``flush_interval`` per changefeed) guarded by this capture's
task key and the info key (a processor whose changefeed moved or was removed writes nothing),
and the processor's progress (checkpoint, resolved ts, rows applied, last synced ts; at the same
pace) and errors (at once) into the task position, from which the owner sets the changefeed's
state and the API and metrics read the figures. Both go in one txn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from services.capture.processor import Processor
from services.capture.state import ClusterState, FeedView
from services.capture.worker import UNCHANGED, Patch, PatchGroup, PatchResult
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import ChangeFeedStatus

log = logging.getLogger(__name__)

ProcessorFactory = Callable[[FeedView], Processor]


class _Running:
    def __init__(self, processor: Processor, task: asyncio.Task[None], epoch: int) -> None:
        self.processor = processor
        self.task = task
        self.epoch = epoch
        self.flushed_at = 0.0


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
    ) -> None:
        self._keys = keys
        self._capture_id = capture_id
        self._make = make
        self._tg = tg
        self._flush_interval = flush_interval
        self._monotonic = monotonic
        self.running: dict[FeedId, _Running] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False

    def tick(self, state: ClusterState) -> Sequence[PatchGroup]:
        wanted = self._wanted(state)
        for feed in list(self.running):
            view = wanted.get(feed)
            run = self.running[feed]
            if view is None or view.info is None or view.info.epoch != run.epoch:
                self._stop(feed)
        for feed, view in wanted.items():
            if feed not in self.running and view.info is not None and not self._closed:
                processor = self._make(view)
                task = self._tg.create_task(processor.run(), name=f"processor-{feed}")
                self.running[feed] = _Running(processor, task, view.info.epoch)
                log.info("changefeed %s: processor started on capture %s", feed, self._capture_id)
        return [g for feed, view in wanted.items() for g in self._report(feed, view)]

    def _wanted(self, state: ClusterState) -> dict[FeedId, FeedView]:
        if self._capture_id not in state.captures:
            return {}  # our registration is gone: we may not run anything
        return {
            feed: view
            for feed, view in state.feeds.items()
            if self._capture_id in view.tasks
            and view.info is not None
            and view.info.state.runs
            and view.status is not None
        }

    def _report(self, feed: FeedId, view: FeedView) -> list[PatchGroup]:
        run = self.running.get(feed)
        if run is None or view.status is None:
            return []
        p = run.processor
        task_key = self._keys.task_key(self._capture_id, feed)
        info_key = self._keys.info_key(feed)
        task = view.tasks[self._capture_id]
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
        if due and p.checkpoint_ts > view.status.checkpoint_ts:
            ts, position = p.checkpoint_ts, p.position

            def advance(old: bytes | None) -> PatchResult:
                if old is None:
                    return UNCHANGED
                status = ChangeFeedStatus.from_json(old)
                if ts <= status.checkpoint_ts:
                    return UNCHANGED
                return replace(status, checkpoint_ts=ts, source_position=position).to_json()

            patches.append(Patch(self._keys.status_key(feed), advance))
        if not patches:
            return []
        if due:
            run.flushed_at = now
        return [PatchGroup(tuple(patches), reads=(task_key, info_key))]

    def _stop(self, feed: FeedId) -> None:
        run = self.running.pop(feed)
        run.task.cancel()
        self._stopping.add(run.task)
        run.task.add_done_callback(self._stopping.discard)
        log.info("changefeed %s: processor stopped on capture %s", feed, self._capture_id)

    async def close(self) -> None:
        """Cancel every processor and wait until they have stopped. No processor starts after
        this: the reactor may still tick until its loop is cancelled, and a processor it
        started then would keep the capture's task group open."""
        self._closed = True
        for feed in list(self.running):
            self._stop(feed)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)
