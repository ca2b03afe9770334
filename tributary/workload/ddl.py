"""DDL the way TiDB runs it for a binlog: upstream statement, job in the history, DDL binlog.

Per DDL, one at a time (``Catalog.ddl_lock``) and holding the table's write lock, so no
transaction on the table is open meanwhile and none starts before the catalog has the new
table info:

1. ids: the job id and, for CREATE/TRUNCATE, a new table id (``KvIdAllocator``);
2. the statement runs upstream (a failure stops here: nothing was recorded);
3. ``append_job`` stores the job with the next schema version (TiDB, too, moves a job to its
   history only once it is done, so a reader never sees a job that did not happen);
4. the DDL binlog: ``prewrite`` with ``ddl_query`` and ``ddl_job_id`` (no prewrite value), a
   fresh commit ts, ``commit``;
5. the catalog applies the job; the lock is released.

A failure after step 2 leaves upstream and history (or binlogs) apart: ``HistoryDiverged``
stops the workload rather than write rows the drainer would decode with the wrong table.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from tributary.ddlhistory import (
    Action,
    Counter,
    DbInfo,
    DdlHistoryError,
    DdlJob,
    KvDdlHistory,
    TableInfo,
    add_column,
    ddl_job,
    drop_column,
)
from tributary.pumpclient import PumpClientError
from tributary.tso.client import Tso
from tributary.tso.errors import TsoError
from tributary.workload.catalog import Catalog, Table
from tributary.workload.columns import ColumnSpec, TableSpec, build_table_info, create_table_sql, q
from tributary.workload.columns import qualified as qname
from tributary.workload.columns import with_index as index_added
from tributary.workload.errors import Abort, HistoryDiverged, WorkloadError
from tributary.workload.stats import WorkloadStats
from tributary.workload.txn import BinlogWriter
from tributary.workload.upstream import Upstream

log = logging.getLogger(__name__)

Make = Callable[[int, int], DdlJob]  # (job id, schema version) -> job


class DdlRunner:
    def __init__(
        self,
        upstream: Upstream,
        binlogs: BinlogWriter,
        tso: Tso,
        history: KvDdlHistory,
        catalog: Catalog,
        stats: WorkloadStats,
    ) -> None:
        self._upstream = upstream
        self._binlogs = binlogs
        self._tso = tso
        self._history = history
        self.catalog = catalog
        self.stats = stats

    async def _next_id(self, counter: Counter) -> int:
        try:
            return await self._history.ids.allocate(counter)
        except DdlHistoryError as e:
            raise WorkloadError(f"allocating a {counter.value}: {e}", retriable=e.retriable) from e

    def _db(self, schema: str) -> DbInfo:
        db = self.catalog.database(schema)
        if db is None:
            raise WorkloadError(f"database {schema} is not in the catalog")
        return db

    async def create_database(self, name: str) -> DbInfo:
        db_id = await self._next_id(Counter.TABLE_ID)
        db = DbInfo(db_id, name, "utf8mb4", "utf8mb4_bin")
        query = f"CREATE DATABASE IF NOT EXISTS {q(name)}"
        await self._run(
            name, query, lambda j, v: ddl_job(j, Action.CREATE_SCHEMA, v, db, None, query)
        )
        return db

    async def create_table(self, schema: str, spec: TableSpec) -> Table:
        db = self._db(schema)
        info = build_table_info(await self._next_id(Counter.TABLE_ID), spec)
        query = create_table_sql(schema, spec)
        await self._run(
            schema, query, lambda j, v: ddl_job(j, Action.CREATE_TABLE, v, db, info, query)
        )
        return self._table(info.id)

    async def add_column(self, table: Table, spec: ColumnSpec) -> Table:
        def change(t: TableInfo) -> TableInfo:
            if t.column(spec.name) is not None:
                raise ValueError(f"column {spec.name} exists")
            t = add_column(t, spec.name, spec.column_type)
            default = None if spec.default is None else spec.default.strip("'")
            last = dataclasses.replace(t.columns[-1], default=default, origin_default=default)
            return dataclasses.replace(t, columns=(*t.columns[:-1], last))

        return await self._alter(
            table,
            Action.ADD_COLUMN,
            lambda name: f"ALTER TABLE {name} ADD COLUMN {spec.definition()}",
            change,
        )

    async def drop_column(self, table: Table, column: str) -> Table:
        return await self._alter(
            table,
            Action.DROP_COLUMN,
            lambda name: f"ALTER TABLE {name} DROP COLUMN {q(column)}",
            lambda t: drop_column(t, column),
        )

    async def add_index(self, table: Table, index: str, columns: tuple[str, ...]) -> Table:
        cols = ", ".join(q(c) for c in columns)
        return await self._alter(
            table,
            Action.ADD_INDEX,
            lambda name: f"ALTER TABLE {name} ADD INDEX {q(index)} ({cols})",
            lambda t: index_added(t, index, columns),
        )

    async def rename_table(self, table: Table, new_name: str) -> Table:
        return await self._alter(
            table,
            Action.RENAME_TABLE,
            lambda name: f"RENAME TABLE {name} TO {qname(table.schema, new_name)}",
            lambda t: dataclasses.replace(t, name=new_name),
        )

    async def truncate_table(self, table: Table) -> Table:
        new_id = await self._next_id(Counter.TABLE_ID)
        await self._alter(
            table,
            Action.TRUNCATE_TABLE,
            lambda name: f"TRUNCATE TABLE {name}",
            lambda t: dataclasses.replace(t, id=new_id),
        )
        return self._table(new_id)

    async def drop_table(self, table: Table) -> None:
        await self._alter(table, Action.DROP_TABLE, lambda name: f"DROP TABLE {name}", None)

    async def _alter(
        self,
        table: Table,
        action: Action,
        statement: Callable[[str], str],
        change: Callable[[TableInfo], TableInfo] | None,
    ) -> Table:
        """A DDL on an existing table, built from the table as it is once its write lock is
        held (another DDL may have renamed or changed it since ``table`` was read)."""
        async with self.catalog.ddl_lock, self.catalog.writing(table.id):
            current = self.catalog.table_by_id(table.id)
            if current is None:
                raise Abort(f"table {table.qualified} (id {table.id}) was dropped meanwhile")
            db = self._db(current.schema)
            query = statement(qname(current.schema, current.name))

            def make(job_id: int, version: int) -> DdlJob:
                info = change(current.info) if change is not None else current.info
                return ddl_job(job_id, action, version, db, info, query, table_id=current.id)

            job = await self._locked(current.schema, query, make)
        info = job.table_info
        return current if action == Action.DROP_TABLE or info is None else self._table(info.id)

    def _table(self, table_id: int) -> Table:
        table = self.catalog.table_by_id(table_id)
        if table is None:
            raise WorkloadError(f"table id {table_id} is not in the catalog")
        return table

    async def _run(self, schema: str, query: str, make: Make) -> DdlJob:
        async with self.catalog.ddl_lock:
            return await self._locked(schema, query, make)

    async def _locked(self, schema: str, query: str, make: Make) -> DdlJob:
        job_id = await self._next_id(Counter.JOB_ID)
        try:
            make(job_id, self.catalog.version + 1)  # a change that no longer fits fails here
        except ValueError as e:
            raise Abort(f"DDL {query!r} no longer applies: {e}") from e
        await self._upstream.execute_ddl(schema, query)
        try:
            job = await self._history.append_job(lambda v: make(job_id, v))
            start_ts = await self._tso.get_ts()
        except (DdlHistoryError, TsoError) as e:
            raise HistoryDiverged(f"DDL {query!r} ran upstream but was not recorded: {e}") from e
        try:
            await self._binlogs.prewrite(start_ts, b"", ddl_query=query.encode(), ddl_job_id=job.id)
        except PumpClientError as e:
            if e.maybe_stored:  # a pump whose answer was lost may hold it: roll it back there
                await self._binlogs.rollback(start_ts)
            raise HistoryDiverged(f"DDL {query!r} ran upstream but was not recorded: {e}") from e
        try:
            commit_ts = await self._tso.get_ts()
        except TsoError as e:
            await self._binlogs.rollback(start_ts)
            raise HistoryDiverged(f"DDL {query!r}: no commit ts: {e}") from e
        await self._binlogs.commit(start_ts, commit_ts)
        self.catalog.apply(job)
        self.stats.ddls += 1
        self.stats.max_commit_ts = max(self.stats.max_commit_ts, commit_ts)
        log.info(
            "DDL job %d at version %d, commit ts %d: %s",
            job.id,
            job.schema_version,
            commit_ts,
            query,
        )
        return job
