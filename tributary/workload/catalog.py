"""What the workload knows of the upstream schema: the history's databases, tables (TiDB table
infos) and schema version (``sinks.pump.schema.HistoryCatalog``), plus one read/write lock per
table.

The catalog follows the DDL history: :meth:`Catalog.load` replays every job (a restarted
workload continues on the tables it created before), and the DDL runner applies each job it
appends. Invariants: ``version`` is the schema version of the newest job applied, and every
table info is the one of that version; a transaction holds the read locks of the tables it
writes from before its start ts until after its commit binlog, and a DDL holds its table's
write lock from before it runs upstream until the catalog has its new table info, so rows are
always encoded with the table info that was current while they were written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable

from tributary.ddlhistory import DdlHistory
from tributary.sinks.pump.rows import Table, sink_table
from tributary.sinks.pump.schema import HistoryCatalog
from tributary.workload.rwlock import RwLock

__all__ = ["Catalog", "Table", "sink_table"]

log = logging.getLogger(__name__)


class Catalog(HistoryCatalog):
    def __init__(self) -> None:
        super().__init__()
        self._locks: dict[int, RwLock] = {}
        self.ddl_lock = asyncio.Lock()  # one DDL at a time, as TiDB's DDL owner runs them

    @classmethod
    async def load(cls, history: DdlHistory) -> Catalog:
        catalog = cls()
        catalog.apply_all(await history.jobs_since(0))
        log.info("catalog at schema version %d: %d tables", catalog.version, len(catalog._tables))
        return catalog

    # -- locks ----------------------------------------------------------------

    def _lock(self, table_id: int) -> RwLock:
        return self._locks.setdefault(table_id, RwLock())

    @contextlib.asynccontextmanager
    async def reading(self, table_ids: Iterable[int]) -> AsyncIterator[int]:
        """Share the tables (locked in id order, so two transactions never wait on each
        other); yields the schema version the transaction's rows are encoded at."""
        async with contextlib.AsyncExitStack() as stack:
            for table_id in sorted(set(table_ids)):
                await stack.enter_async_context(self._lock(table_id).read())
            yield self.version

    @contextlib.asynccontextmanager
    async def writing(self, table_id: int) -> AsyncIterator[None]:
        async with self._lock(table_id).write():
            yield
