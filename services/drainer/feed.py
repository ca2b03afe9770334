"""The merge loop: per-pump inboxes in, one commit-ts-ordered queue out.

Each puller puts its items into its pump's bounded ``Inbox`` (a full inbox
makes the puller wait until it is half empty, which in turn stops reading the
gRPC stream). One task,
``MergeFeed.run``, moves items from the inboxes the merger wants into the
merger and puts whatever it emits into the output queue, in order.

Invariant: the loop never misses a wake-up: it clears its event *before* it
looks at the inboxes, and every put and every source change sets it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import NoReturn

from services.drainer.item import PulledBinlogItem
from services.drainer.merge import Merger

log = logging.getLogger(__name__)

INBOX_SIZE = 256  # items a puller may be ahead of the merge, per pump


class Inbox:
    """One source's bounded queue into the merge loop.

    A full inbox makes ``put`` wait until the merge has taken it down to half, so the puller
    reads its stream in bursts rather than one message per merged item: gRPC hands back flow
    control window once per burst instead of once per message (a WINDOW_UPDATE write each)
    when the drainer, not the pump, is the bottleneck.
    """

    def __init__(self, wake: asyncio.Event, size: int = INBOX_SIZE) -> None:
        self._items: deque[PulledBinlogItem] = deque()
        self._size = max(size, 1)
        self._room = asyncio.Event()
        self._room.set()
        self._wake = wake

    async def put(self, item: PulledBinlogItem) -> None:
        if len(self._items) >= self._size:
            self._room.clear()
            await self._room.wait()
        self._items.append(item)
        self._wake.set()

    def take(self) -> PulledBinlogItem | None:
        if not self._items:
            return None
        item = self._items.popleft()
        if len(self._items) <= self._size // 2:
            self._room.set()
        return item

    def qsize(self) -> int:
        return len(self._items)


class MergeFeed:
    """Owns the merger's sources and their inboxes; ``run`` is the merge task."""

    def __init__(
        self,
        merger: Merger[PulledBinlogItem],
        out: asyncio.Queue[PulledBinlogItem],
        inbox_size: int = INBOX_SIZE,
    ) -> None:
        self.merger = merger
        self._out = out
        self._inbox_size = inbox_size
        self._inboxes: dict[str, Inbox] = {}
        self._wake = asyncio.Event()

    def add_source(self, source_id: str, from_ts: int) -> Inbox:
        self.merger.add_source(source_id, from_ts)
        inbox = Inbox(self._wake, self._inbox_size)
        self._inboxes[source_id] = inbox
        self._wake.set()
        return inbox

    def remove_source(self, source_id: str) -> None:
        """Forget the source; items still in its inbox are dropped (the pump is gone)."""
        self.merger.remove_source(source_id)
        inbox = self._inboxes.pop(source_id, None)
        if inbox is not None and inbox.qsize():
            log.info("dropped %d unmerged items of removed source %s", inbox.qsize(), source_id)
        self._wake.set()

    def inbox_sizes(self) -> dict[str, int]:
        """Items waiting in each source's inbox."""
        return {source_id: inbox.qsize() for source_id, inbox in self._inboxes.items()}

    def pause(self, source_id: str) -> None:
        self.merger.pause(source_id)

    def resume(self, source_id: str) -> None:
        self.merger.resume(source_id)
        self._wake.set()

    def _feed(self) -> None:
        for source_id in self.merger.wanted():
            item = self._inboxes[source_id].take()
            if item is not None:
                self.merger.push(source_id, item)

    async def run(self) -> NoReturn:
        while True:
            self._wake.clear()
            self._feed()
            item = self.merger.pop()
            if item is None:
                await self._wake.wait()
                continue
            await self._out.put(item)
