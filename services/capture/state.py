"""The cluster as a reactor sees it: a mirror of the etcd prefix, and its parsed view.

``Mirror`` holds raw values with the mod revision each was read at. ``apply`` keeps every key
monotonic: an event older than what the mirror already holds for that key (a replay of the
history between the initial prefix read and the watch start) changes nothing, so the mirror
never goes back in time. Example: the prefix read saw ``k`` at revision 12 and the watch
replays ``put k @10`` and ``delete k @11``: both are ignored; ``put k @13`` then applies.

``ClusterState.parse`` is a pure function of a mirror: captures, the owner (the election key
with the lowest revision; election keys are written once, so mod = create revision), and each
changefeed's info, status, task positions and spans (``tributary.cdc.spans``), and the captures
asked to drain. Unreadable records are logged and skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from tributary.cdc.errors import BadRecord
from tributary.cdc.keys import FeedId, KeyKind, Keys
from tributary.cdc.model import CaptureInfo, ChangeFeedInfo, ChangeFeedStatus, TaskPosition
from tributary.cdc.spans import TableAssign, TableProgress
from tributary.coord.kv import KeyValue, WatchEvent, WatchEventKind

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Entry:
    value: bytes
    mod_revision: int


class Mirror:
    """Raw key -> (value, mod revision) for one prefix, plus the highest revision seen."""

    def __init__(self) -> None:
        self.entries: dict[bytes, Entry] = {}
        self._deleted: dict[bytes, int] = {}  # key -> revision of its deletion
        self.revision = 0

    def load(self, kvs: list[KeyValue], revision: int) -> None:
        self.entries = {kv.key: Entry(kv.value, kv.mod_revision) for kv in kvs}
        self._deleted.clear()
        self.revision = max([revision, *(kv.mod_revision for kv in kvs)])

    def apply(self, event: WatchEvent) -> bool:
        """Apply one watch event; False when it was older than what the mirror holds."""
        self.revision = max(self.revision, event.mod_revision)
        held = self.entries.get(event.key)
        seen = held.mod_revision if held is not None else self._deleted.get(event.key, 0)
        if event.mod_revision <= seen:
            return False
        if event.kind is WatchEventKind.DELETE:
            self.entries.pop(event.key, None)
            self._deleted[event.key] = event.mod_revision
        else:
            self.entries[event.key] = Entry(event.value, event.mod_revision)
            self._deleted.pop(event.key, None)
        return True

    def mod_revision(self, key: bytes) -> int:
        """The mod revision the mirror holds for ``key``; 0 when absent."""
        held = self.entries.get(key)
        return held.mod_revision if held is not None else 0

    def value(self, key: bytes) -> bytes | None:
        held = self.entries.get(key)
        return held.value if held is not None else None


@dataclass
class FeedView:
    feed: FeedId
    info: ChangeFeedInfo | None = None
    status: ChangeFeedStatus | None = None
    tasks: dict[str, TaskPosition] = field(default_factory=dict)  # capture id -> position
    assign: dict[str, TableAssign] = field(default_factory=dict)  # span -> its capture
    progress: dict[str, TableProgress] = field(default_factory=dict)  # span -> checkpoint


@dataclass(frozen=True, slots=True)
class OwnerView:
    capture_id: str
    epoch: int


@dataclass
class ClusterState:
    captures: dict[str, CaptureInfo] = field(default_factory=dict)
    owner: OwnerView | None = None
    feeds: dict[FeedId, FeedView] = field(default_factory=dict)
    drains: set[str] = field(default_factory=set)  # captures asked to hand their spans over

    @classmethod
    def parse(cls, keys: Keys, mirror: Mirror) -> ClusterState:
        state = cls()
        owners: list[tuple[int, str]] = []
        for key, entry in mirror.entries.items():
            parsed = keys.parse(key)
            if parsed is None:
                continue
            try:
                if parsed.kind is KeyKind.CAPTURE:
                    state.captures[parsed.name] = CaptureInfo.from_json(entry.value)
                elif parsed.kind is KeyKind.OWNER:
                    owners.append((entry.mod_revision, entry.value.decode(errors="replace")))
                elif parsed.kind is KeyKind.DRAIN:
                    state.drains.add(parsed.name)
                else:
                    assert parsed.feed is not None
                    view = state.feeds.setdefault(parsed.feed, FeedView(parsed.feed))
                    if parsed.kind is KeyKind.INFO:
                        view.info = ChangeFeedInfo.from_json(entry.value)
                    elif parsed.kind is KeyKind.STATUS:
                        view.status = ChangeFeedStatus.from_json(entry.value)
                    elif parsed.kind is KeyKind.TABLE:
                        view.assign[parsed.name] = TableAssign.from_json(entry.value)
                    elif parsed.kind is KeyKind.PROGRESS:
                        view.progress[parsed.name] = TableProgress.from_json(entry.value)
                    else:
                        view.tasks[parsed.name] = TaskPosition.from_json(entry.value)
            except BadRecord as e:
                log.warning("skipping unreadable record %r: %s", key, e)
        if owners:
            epoch, capture_id = min(owners)
            state.owner = OwnerView(capture_id, epoch)
        return state
