"""Merging the pumps' binlog streams into one stream in commit-ts order (pure; no I/O).

Each source (one pump) delivers its binlogs in increasing commit ts. The merger
keeps at most one pending item per source in a heap and emits the smallest one
only when *every* source it follows has an item pending: until then a source
without one could still deliver something smaller. An idle pump keeps moving
through its fake binlogs, so it does not hold the merge back for long.

Invariants:
- emitted commit ts are strictly increasing, starting above ``latest_ts``;
- an item whose commit ts equals the last emitted one is a duplicate (the same
  transaction served by two pumps): dropped, logged as a warning and counted;
- on a tie a transaction wins over a fake binlog (``is_fake``), which is then
  dropped without a warning: a fake binlog's timestamp comes from the pumps'
  TSO, a transaction's from its writer's, and a writer that is not on the same
  clock (a standalone tidb-server's own oracle) can commit at exactly the
  timestamp of a fake binlog; the fake must not take the transaction's place;
- an item below the last emitted one is out of order: dropped, logged as an
  error and counted as ``disorder``; the merge never goes back;
- a paused source is still waited for (a paused pump may still hold commits
  below the other pumps' positions); ``wanted`` leaves it out, so its driver
  stops feeding it until it resumes;
- a removed source is no longer waited for; an item it already delivered stays
  in the heap and is emitted in order.

Worked example (sources A and B, latest emitted ts 10)::

    push A:12   pop -> None   B has nothing pending and could still send 11
    push B:15   pop -> A:12   every source has an item; 12 is the smallest
                pop -> None   A has nothing pending now
    push A:15   pop -> B:15   tie on 15: the item pushed first wins (a transaction
                              before a fake binlog)
                pop -> None   B has nothing pending
    push B:20   pop -> None   A:15 equals the latest (15): duplicate, dropped;
                              then A has nothing pending
    push A:13   pop -> None   13 < 15: disorder, dropped
    remove A    pop -> B:20   only B is waited for now
"""

from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)


class HasCommitTs(Protocol):
    @property
    def commit_ts(self) -> int: ...


T = TypeVar("T", bound=HasCommitTs)


def _fake(item: object) -> bool:
    """A fake binlog (``PulledBinlogItem.is_fake``): it loses a tie on commit ts."""
    return getattr(item, "is_fake", False) is True


@dataclass(slots=True)
class MergeStats:
    """Counters the metrics read: items emitted, duplicates and out-of-order items dropped."""

    emitted: int = 0
    duplicates: int = 0
    disorder: int = 0


@dataclass(slots=True)
class _Source:
    source_id: str
    position: int  # highest commit ts pushed (``from_ts`` before the first push)
    paused: bool = False
    pending: bool = False


@dataclass(frozen=True, slots=True)
class SourceView:
    """What the merger knows about one source."""

    position: int
    paused: bool
    pending: bool


class Merger(Generic[T]):
    """Heap merge of N increasing streams; see the module docstring."""

    def __init__(self, latest_ts: int = 0) -> None:
        self._latest = latest_ts
        self._sources: dict[str, _Source] = {}
        self._heap: list[tuple[int, bool, int, _Source, T]] = []
        self._seq = itertools.count()
        self.stats = MergeStats()

    @property
    def latest_ts(self) -> int:
        """The commit ts of the last emitted item (the start ts before any)."""
        return self._latest

    def sources(self) -> dict[str, SourceView]:
        return {
            s.source_id: SourceView(s.position, s.paused, s.pending) for s in self._sources.values()
        }

    def add_source(self, source_id: str, from_ts: int) -> None:
        """Follow a new source whose items come after ``from_ts``."""
        if source_id in self._sources:
            raise ValueError(f"source {source_id!r} is already merged")
        self._sources[source_id] = _Source(source_id, from_ts)
        log.info("merging source %s from commit ts %d", source_id, from_ts)

    def remove_source(self, source_id: str) -> bool:
        """Stop waiting for the source; False if it was not merged."""
        source = self._sources.pop(source_id, None)
        if source is not None:
            log.info("source %s left the merge at commit ts %d", source_id, source.position)
        return source is not None

    def pause(self, source_id: str) -> None:
        self._sources[source_id].paused = True

    def resume(self, source_id: str) -> None:
        self._sources[source_id].paused = False

    def wanted(self) -> list[str]:
        """Sources to feed now: not paused and nothing pending."""
        return [s.source_id for s in self._sources.values() if not (s.pending or s.paused)]

    def waiting_for(self) -> list[str]:
        """Sources the merge waits for: nothing pending (paused or not)."""
        return [s.source_id for s in self._sources.values() if not s.pending]

    def push(self, source_id: str, item: T) -> None:
        """Give the source's next item; a source holds at most one pending item."""
        source = self._sources[source_id]
        if source.pending:
            raise ValueError(f"source {source_id!r} already has an item pending")
        source.pending = True
        source.position = max(source.position, item.commit_ts)
        heapq.heappush(self._heap, (item.commit_ts, _fake(item), next(self._seq), source, item))

    def pop(self) -> T | None:
        """The next item in commit-ts order, or None while some source has nothing pending."""
        while self._heap:
            if any(not s.pending for s in self._sources.values()):
                return None
            commit_ts, fake, _, source, item = heapq.heappop(self._heap)
            source.pending = False
            if commit_ts == self._latest and fake:
                log.debug("fake binlog at emitted ts %d from %s", commit_ts, source.source_id)
                continue
            if commit_ts == self._latest:
                self.stats.duplicates += 1
                log.warning(
                    "duplicate binlog: commit ts %d from %s was already emitted; dropped",
                    commit_ts,
                    source.source_id,
                )
                continue
            if commit_ts < self._latest:
                self.stats.disorder += 1
                log.error(
                    "binlog's commit ts %d from %s is less than the last ts %d; dropped",
                    commit_ts,
                    source.source_id,
                    self._latest,
                )
                continue
            self._latest = commit_ts
            self.stats.emitted += 1
            return item
        return None
