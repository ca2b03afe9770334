"""Applying merged binlogs to the sink, one at a time, in commit-ts order.

Invariant: the checkpoint advances over a binlog only after the sink accepted
it (``await sink.apply`` returned); a fake binlog has nothing to apply and
advances it at once. A sink error stops the syncer (and the drainer) with the
checkpoint still below the failed binlog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import NoReturn

from services.drainer.item import PulledBinlogItem
from services.drainer.output import Sink
from services.drainer.progress import Checkpointer

log = logging.getLogger(__name__)


class Syncer:
    def __init__(
        self,
        queue: asyncio.Queue[PulledBinlogItem],
        sink: Sink,
        checkpointer: Checkpointer,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._queue = queue
        self._sink = sink
        self._checkpointer = checkpointer
        self._clock = clock
        self.applied = 0  # binlogs the sink accepted
        self.fakes = 0  # fake binlogs passed over
        self.last_apply = clock()  # when the sink last accepted one (start time before)

    async def run(self) -> NoReturn:
        while True:
            item = await self._queue.get()
            try:
                if item.is_fake:
                    self.fakes += 1
                else:
                    await self._sink.apply(item)
                    self.applied += 1
                    self.last_apply = self._clock()
                self._checkpointer.advance(item.commit_ts)
            finally:
                self._queue.task_done()

    async def drain(self, timeout: float) -> bool:  # noqa: ASYNC109 (a deadline, not a call timeout)
        """Wait until every queued binlog was handled; False if ``timeout`` s passed first."""
        try:
            async with asyncio.timeout(timeout):
                await self._queue.join()
        except TimeoutError:
            log.warning("%d merged binlogs not applied at shutdown", self._queue.qsize())
            return False
        return True

    def synced(self, check_time: float) -> bool:
        """Nothing queued and no binlog applied for ``check_time`` seconds (caught up)."""
        return self._queue.empty() and self._clock() - self.last_apply >= check_time
