"""The owner's table scheduler: a running changefeed's spans over the live captures.

A pure function of the cluster state (``plan``), giving patch groups the owner commits. For one
changefeed, each tick:

1. a changefeed without spans (a record from before spans) gets the single span ``*``;
2. a span whose capture is gone (its session expired) is assigned to the schedulable capture
   holding the fewest of this changefeed's spans (ties: fewest spans overall, then id); so is a
   span that was ``stopping`` and whose progress says it was released (the old capture stopped
   it and wrote its last checkpoint). Schedulable: alive and not draining;
3. a span on a draining capture is set ``stopping`` (when another capture can take it);
4. balance, when nothing is moving: while the busiest schedulable capture holds two spans more
   than the idlest, one span of the busiest is set ``stopping`` (one move per tick);
5. every capture holding a span has a task position (its processor's error and figures),
   and no other capture has one;
6. the status checkpoint is the minimum of the spans' checkpoints (with that span's source
   position), moved forward only.

Example: spans a, b, c, d on capture x; y joins. Step 4 sets a ``stopping`` (x holds 4, y 0);
x's processor stops a and writes a's checkpoint with capture ""; step 2 then assigns a to y,
which claims and resumes it from that checkpoint. Next tick b moves the same way; then x and y
hold 2 each and nothing moves. x dies: its spans are assigned to y at once (y's claim does
not wait for a release: x's session is gone, so it runs nothing).
"""

from __future__ import annotations

import logging
from collections import Counter

from services.capture.state import ClusterState, FeedView
from services.capture.worker import UNCHANGED, Patch, PatchFn, PatchGroup, PatchResult
from tributary.cdc.keys import Keys
from tributary.cdc.model import ChangeFeedStatus, TaskPosition
from tributary.cdc.spans import WHOLE_SPAN, SpanState, TableAssign, TableProgress

log = logging.getLogger(__name__)


def _put(value: bytes) -> PatchFn:
    def fn(_: bytes | None) -> PatchResult:
        return value

    return fn


def _create(value: bytes) -> PatchFn:
    def fn(old: bytes | None) -> PatchResult:
        return value if old is None else UNCHANGED

    return fn


def _delete(_: bytes | None) -> PatchResult:
    return None


class Scheduler:
    """Plans one changefeed's spans; ``load`` counts spans per capture over every changefeed."""

    def __init__(self, keys: Keys, state: ClusterState, load: Counter[str]) -> None:
        self._keys = keys
        self._alive = set(state.captures)
        self._schedulable = sorted(self._alive - state.drains)
        self._drains = state.drains
        self._load = load

    def plan(self, view: FeedView) -> list[PatchGroup]:
        keys, feed = self._keys, view.feed
        info_key = keys.info_key(feed)
        if not view.assign:
            whole = self._whole(view)
            if whole is None:
                return []
            created, holder = whole
            created += self._tasks(view, {WHOLE_SPAN: TableAssign(holder)})
            return [PatchGroup(tuple(created), reads=(info_key,))]
        assign = dict(view.assign)
        patches: list[Patch] = []
        reads: list[bytes] = [info_key]
        moving = False
        for span, a in sorted(assign.items()):
            p = view.progress.get(span)
            released = a.state is SpanState.STOPPING and p is not None and p.capture == ""
            if a.capture not in self._alive or released:
                target = self._target(assign)
                if target is None:
                    continue
                why = "released" if released else f"capture {a.capture or '-'} is gone"
                log.info("changefeed %s: table %s -> capture %s (%s)", feed, span, target, why)
                assign[span] = TableAssign(target)
                self._load[target] += 1
                patches.append(Patch(keys.table_key(feed, span), _put(assign[span].to_json())))
                reads.append(keys.progress_key(feed, span))
                moving = True
            elif a.state is SpanState.STOPPING:
                moving = True
            elif a.capture in self._drains and self._schedulable:
                patches.append(self._stop(view, span, a, "its capture drains"))
                assign[span] = TableAssign(a.capture, SpanState.STOPPING)
                moving = True
        if not moving and not self._drains:
            patches.extend(self._balance(view, assign))
        patches.extend(self._tasks(view, assign))
        groups = [PatchGroup(tuple(patches), reads=tuple(reads))] if patches else []
        status = self._status(view)
        if status is not None:
            groups.append(PatchGroup((status,), reads=(info_key,)))
        return groups

    def _whole(self, view: FeedView) -> tuple[list[Patch], str] | None:
        """A changefeed from before spans: one span, ``*``, from its status, on the capture
        running it already if any."""
        if view.status is None:
            return None
        keys, feed = self._keys, view.feed
        running = [c for c in sorted(view.tasks) if c in self._alive]
        target = running[0] if running else self._target({})
        if target is None:
            return None
        self._load[target] += 1
        progress = TableProgress(view.status.checkpoint_ts, view.status.source_position)
        patches = [
            Patch(keys.table_key(feed, WHOLE_SPAN), _create(TableAssign(target).to_json())),
            Patch(keys.progress_key(feed, WHOLE_SPAN), _create(progress.to_json())),
        ]
        return patches, target

    def _target(self, assign: dict[str, TableAssign]) -> str | None:
        if not self._schedulable:
            return None
        here = Counter(a.capture for a in assign.values())

        def key(c: str) -> tuple[int, int, str]:
            return (here[c], self._load[c], c)

        return min(self._schedulable, key=key)

    def _stop(self, view: FeedView, span: str, a: TableAssign, why: str) -> Patch:
        feed, capture = view.feed, a.capture
        log.info("changefeed %s: table %s stops on capture %s (%s)", feed, span, capture, why)
        stopping = TableAssign(a.capture, SpanState.STOPPING).to_json()
        return Patch(self._keys.table_key(view.feed, span), _put(stopping))

    def _balance(self, view: FeedView, assign: dict[str, TableAssign]) -> list[Patch]:
        if len(self._schedulable) < 2:
            return []
        held = Counter({c: 0 for c in self._schedulable})
        held.update(a.capture for a in assign.values() if a.capture in held)
        busiest = max(self._schedulable, key=lambda c: (held[c], c))
        idlest = min(self._schedulable, key=lambda c: (held[c], c))
        if held[busiest] - held[idlest] < 2:
            return []
        span = max(s for s, a in assign.items() if a.capture == busiest)
        assign[span] = TableAssign(busiest, SpanState.STOPPING)
        return [self._stop(view, span, TableAssign(busiest), f"rebalance to {idlest}")]

    def _tasks(self, view: FeedView, assign: dict[str, TableAssign]) -> list[Patch]:
        keys, feed = self._keys, view.feed
        holders = {a.capture for a in assign.values() if a.capture in self._alive}
        patches = [
            Patch(keys.task_key(c, feed), _create(TaskPosition().to_json()))
            for c in sorted(holders - set(view.tasks))
        ]
        patches += [Patch(keys.task_key(c, feed), _delete) for c in view.tasks if c not in holders]
        return patches

    def _status(self, view: FeedView) -> Patch | None:
        if view.status is None or not view.assign or set(view.progress) < set(view.assign):
            return None
        low = min(
            (view.progress[s] for s in view.assign),
            key=lambda p: p.checkpoint_ts,
        )
        if low.checkpoint_ts <= view.status.checkpoint_ts:
            return None
        ts, position = low.checkpoint_ts, low.source_position

        def advance(old: bytes | None) -> PatchResult:
            if old is None:
                return UNCHANGED
            status = ChangeFeedStatus.from_json(old)
            if ts <= status.checkpoint_ts:
                return UNCHANGED
            return ChangeFeedStatus(
                ts, position, status.min_table_barrier_ts, status.admin_job_type
            ).to_json()

        return Patch(self._keys.status_key(view.feed), advance)
