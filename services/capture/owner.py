"""The owner's reactor: places changefeeds on captures and keeps their states.

One capture at a time is owner (``coord.election``); its worker commits every patch group
guarded by its election key, so a deposed owner's decisions are never written. Each tick, for
every changefeed (one patch group each, guarded by the info key it read):

* no info (removed): delete the leftover status, task positions and spans;
* a state that does not run (stopped, failed, finished, removed): delete its task positions
  (the spans keep their checkpoints for a resume), and for ``removed`` the info, the status
  and the spans as well;
* ``target-ts`` reached by the status checkpoint: ``finished``;
* a task position reporting a non-retriable error: ``failed`` with that error; a retriable one:
  ``warning``; a warning whose processor has recovered: back to ``normal``;
* scheduling (``schedule.Scheduler``): the changefeed's spans (its tables, or the whole
  changefeed as one span) over the live captures, moved when a capture joins, drains or dies;
  a task position on each capture holding a span; the status checkpoint the minimum of the
  spans' checkpoints.

Drain requests (``__cdc_meta__/drain/<capture>``) of captures that are gone are deleted.

Example: captures a, b, c; a whole feed f1 on a, f2 on b. a's lease expires: its key goes, so
the next tick assigns f1's span to c (c holds none), puts ``task/position/c/f1`` and deletes
``task/position/a/f1``. c's processor resumes from the span's checkpoint.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from services.capture.errors import NotOwner
from services.capture.present import Progress, progress
from services.capture.schedule import Scheduler
from services.capture.state import ClusterState, FeedView
from services.capture.worker import Patch, PatchFn, PatchGroup, PatchResult
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import AdminJob, ChangeFeedInfo, FeedState

log = logging.getLogger(__name__)


def _delete(_: bytes | None) -> PatchResult:
    return None


def _put(value: bytes) -> PatchFn:
    def fn(_: bytes | None) -> PatchResult:
        return value

    return fn


class Owner:
    def __init__(self, keys: Keys, capture_id: str, epoch: int) -> None:
        self._keys = keys
        self._capture_id = capture_id
        self.epoch = epoch
        # Each changefeed's state and figures as of the last tick (the owner's metrics).
        self.figures: dict[FeedId, tuple[FeedState, Progress]] = {}

    def tick(self, state: ClusterState) -> Sequence[PatchGroup]:
        owner = state.owner
        if owner is None or owner.capture_id != self._capture_id or owner.epoch != self.epoch:
            raise NotOwner(
                f"capture {self._capture_id} is no longer the owner (epoch {self.epoch})"
            )
        load = Counter(
            a.capture
            for view in state.feeds.values()
            if view.info is not None and view.info.state.runs
            for a in view.assign.values()
            if a.capture in state.captures
        )
        load.update(  # changefeeds from before spans: their processors
            c
            for view in state.feeds.values()
            if not view.assign
            for c in view.tasks
            if c in state.captures
        )
        scheduler = Scheduler(self._keys, state, load)
        self.figures = {
            view.feed: (view.info.state, progress(view.status, view.tasks))
            for view in state.feeds.values()
            if view.info is not None
        }
        groups = [  # drain requests of captures that are gone
            PatchGroup((Patch(self._keys.drain_key(c), _delete),))
            for c in sorted(state.drains - set(state.captures))
        ]
        for view in sorted(state.feeds.values(), key=lambda v: str(v.feed)):
            patches = self._feed(view)
            if patches is None:
                groups.extend(scheduler.plan(view))
            elif patches:
                groups.append(PatchGroup(tuple(patches), reads=(self._keys.info_key(view.feed),)))
        return groups

    def _feed(self, view: FeedView) -> list[Patch] | None:
        """The patches of a changefeed's state; None when it runs on (then it is scheduled)."""
        keys, feed = self._keys, view.feed
        tasks = [Patch(keys.task_key(c, feed), _delete) for c in view.tasks]
        spans = [Patch(keys.table_key(feed, s), _delete) for s in view.assign]
        spans += [Patch(keys.progress_key(feed, s), _delete) for s in view.progress]
        info = view.info
        if info is None:
            leftovers = tasks + spans
            return leftovers + ([Patch(keys.status_key(feed), _delete)] if view.status else [])
        if info.state is FeedState.REMOVED:
            return [
                *tasks,
                *spans,
                Patch(keys.info_key(feed), _delete),
                Patch(keys.status_key(feed), _delete),
            ]
        if not info.state.runs:
            return tasks
        changed = self._next_info(view, info)
        if changed is not None:
            log.info("changefeed %s: %s -> %s", feed, info.state.value, changed.state.value)
            patches = [Patch(keys.info_key(feed), _put(changed.to_json()))]
            return patches + (tasks if not changed.state.runs else [])
        return None

    def _next_info(self, view: FeedView, info: ChangeFeedInfo) -> ChangeFeedInfo | None:
        """The info's next state, or None when it stays as it is."""
        status = view.status
        if info.target_ts and status is not None and status.checkpoint_ts >= info.target_ts:
            return info.with_state(FeedState.FINISHED, admin_job_type=AdminJob.FINISH)
        errors = [t.error for t in view.tasks.values() if t.error is not None]
        fatal = [e for e in errors if not e.retriable]
        if fatal:
            return info.with_state(FeedState.FAILED, error=fatal[0])
        if errors and (info.state is not FeedState.WARNING or info.warning != errors[0]):
            return info.with_state(FeedState.WARNING, warning=errors[0])
        if not errors and info.state is FeedState.WARNING and view.tasks:
            return info.with_state(FeedState.NORMAL, warning=None)
        return None
