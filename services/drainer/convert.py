"""From a merged binlog to the transaction the sink gets: skip, translate, filter.

Per binlog, in commit-ts order (the schema tracker sees every DDL, filtered or not):

* fake binlogs and commit ts listed in ``ignore-txn-commit-ts`` become checkpoint-only
  markers;
* everything else goes through ``translate.to_txn`` (rows decoded with the table info of
  their schema version; DDL applied to the tracker) and then the table filter, which turns
  what it drops into markers, so filtered stretches still move the checkpoint.

A DDL binlog whose job is not in the history yet (``DdlJobMissing``), or a history that
cannot be read right now, is retried with backoff for up to ``wait`` seconds: writers store
the job before they write the binlog, so a short wait covers a lagging history replica.
Anything else (an undecodable row, an unknown table) raises at once, naming the commit ts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from services.drainer.item import PulledBinlogItem
from services.drainer.schema import SchemaTracker
from services.drainer.translate import TranslateError, to_txn
from tributary.change import TableFilter, Txn
from tributary.ddlhistory import DdlHistory

log = logging.getLogger(__name__)

DDL_WAIT = 60.0  # seconds a binlog may wait for its DDL job or for the history to answer


class Converter:
    def __init__(
        self,
        history: DdlHistory,
        table_filter: TableFilter | None = None,
        ignore_commit_ts: Iterable[int] = (),
        *,
        tz: dt.tzinfo = dt.UTC,
        wait: float = DDL_WAIT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._history = history
        self._filter = table_filter or TableFilter()
        self._ignore = frozenset(ignore_commit_ts)
        self._tz = tz
        self._wait = wait
        self._clock = clock
        self._sleep = sleep
        self.schema = SchemaTracker()
        self.ignored = 0  # binlogs skipped by commit ts
        self.ddl_jobs = 0  # DDL binlogs whose job was found and translated

    async def convert(self, item: PulledBinlogItem) -> Txn:
        if item.is_fake:
            return Txn(item.commit_ts, item.start_ts)
        if item.commit_ts in self._ignore:
            self.ignored += 1
            log.info(
                "skipping the transaction at commit ts %d (ignore-txn-commit-ts)", item.commit_ts
            )
            return Txn(item.commit_ts, item.start_ts)
        txn = await self._translate(item)
        if txn.ddl is not None:
            self.ddl_jobs += 1
        return self._filter.filter(txn)

    async def _translate(self, item: PulledBinlogItem) -> Txn:
        deadline = self._clock() + self._wait
        delay = 0.05
        while True:
            try:
                return await to_txn(item, self.schema, self._history, tz=self._tz)
            except TranslateError as e:
                if not e.retriable or self._clock() >= deadline:
                    raise
                log.warning("%s; retrying in %.2f s", e, delay)
            await self._sleep(delay)
            delay = min(delay * 2, 2.0)
