"""Pairs prewrite (P) and commit/rollback (C) binlogs and computes the pump's max commit ts.

Pure logic (no I/O, no clock): the storage pushes every stored binlog in
arrival (= value-log) order and asks which prewrite blocks progress.

Rule (tidb-binlog ``pump/storage/sorter.go``): items sit in a FIFO in arrival
order. The head is popped while it is not a prewrite still waiting for its
commit/rollback; a popped commit or fake binlog whose commit ts is above the
current max becomes the new max. A plain rollback has commit ts 0 and never
moves the max; a fake binlog (rollback with start_ts == commit_ts) does.

Invariant: the max commit ts only grows, and it never takes a commit ts from
an item that arrived after a prewrite still waiting. TiDB asks for a commit ts
only after its P-binlog is stored, so every commit still to come for a stored
prewrite is above every commit ts that arrived before that prewrite: no commit
with commit_ts <= max_commit_ts can still arrive for a prewrite already stored.

Worked example (arrival order, P(s) = prewrite with start s, C(s,c) = commit,
R(s) = rollback, F(t) = fake binlog at t)::

    push P(10)      queue [P10*]             max 0    (* = waiting)
    push P(12)      queue [P10*, P12*]       max 0
    push C(12,15)   queue [P10*, P12, C15]   max 0    P12 matched, but P10 blocks
    push F(16)      queue [P10*, P12, C15, F16]
    push C(10,17)   queue [] -> pops P10, P12, C15 (max 15), F16 (max 16), C17 (max 17)
    push P(20)      queue [P20*]             max 17
    push R(20)      queue [] -> pops P20, R20 (commit 0: max stays 17)

Had the storage emitted C15 at the third step, the later C(10,17) would be fine,
but a C(10,14) (possible: commit 14 was taken before 15) would land below the
max a drainer had already passed. A prewrite that waits longer than the txn
timeout is settled from outside (:meth:`Sorter.settle`) so the pump cannot
stall forever.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple


class ItemKind(enum.Enum):
    PREWRITE = "prewrite"
    COMMIT = "commit"  # a commit binlog, or a fake binlog (commit_ts == start_ts)
    ROLLBACK = "rollback"  # a plain rollback (commit_ts == 0)


class SortItem(NamedTuple):
    """One stored binlog. ``pos`` is the storage's opaque position of it (for restart)."""

    kind: ItemKind
    start_ts: int
    commit_ts: int
    pos: object = None


class Sorter:
    """The FIFO described in the module docstring."""

    def __init__(self, max_commit_ts: int = 0) -> None:
        self._max = max_commit_ts
        self._queue: deque[SortItem] = deque()
        self._waiting: set[int] = set()
        self._handled: object = None

    @property
    def max_commit_ts(self) -> int:
        return self._max

    @property
    def handled(self) -> object:
        """``pos`` of the last item popped (everything before it is done), or None."""
        return self._handled

    @property
    def queued(self) -> int:
        return len(self._queue)

    def waiting(self) -> list[int]:
        """start_ts of every stored prewrite still waiting for its commit/rollback, sorted."""
        return sorted(self._waiting)

    def all_matched(self) -> bool:
        """True when no stored prewrite is waiting for its commit/rollback."""
        return not self._waiting

    def push(self, item: SortItem) -> bool:
        """Add the next stored binlog; True if the max commit ts moved."""
        if item.kind is ItemKind.PREWRITE:
            self._waiting.add(item.start_ts)
        else:
            self._waiting.discard(item.start_ts)
        self._queue.append(item)
        return self._drain()

    def push_many(self, items: Iterable[SortItem]) -> bool:
        """:meth:`push` each item in order; True if the max commit ts moved.

        The same as pushing one by one: a prewrite added at the tail cannot unblock the
        head, so the queue is drained only after a commit or rollback arrives."""
        before = self._max
        queue, waiting, prewrite = self._queue, self._waiting, ItemKind.PREWRITE
        for item in items:
            if item.kind is prewrite:
                waiting.add(item.start_ts)
                queue.append(item)
            else:
                waiting.discard(item.start_ts)
                queue.append(item)
                self._drain()
        return self._max != before

    def settle(self, start_ts: int) -> bool:
        """Stop waiting for ``start_ts`` (resolved as rolled back); True if the max moved."""
        self._waiting.discard(start_ts)
        return self._drain()

    def blocking_prewrite(self) -> int | None:
        """start_ts of the waiting prewrite at the head of the queue, if any."""
        if self._queue:
            head = self._queue[0]
            if head.kind is ItemKind.PREWRITE and head.start_ts in self._waiting:
                return head.start_ts
        return None

    def _drain(self) -> bool:
        before = self._max
        queue, waiting = self._queue, self._waiting
        while queue:
            head = queue[0]
            if head.kind is ItemKind.PREWRITE and head.start_ts in waiting:
                break
            queue.popleft()
            if head.commit_ts > self._max:
                self._max = head.commit_ts
            self._handled = head.pos
        return self._max != before
