"""The pump sink's tables in the DDL history: TiDB table ids and infos for the tables it writes.

The catalog *is* the DDL history in etcd (``KvDdlHistory``), replayed into a
``HistoryCatalog``: it survives restarts and is shared by every writer of the history. How the
sink keeps it (the drainer decodes a DML binlog with the table info of the binlog's schema
version, and executes downstream exactly the DDL binlogs' queries):

* a table is *registered* when a row arrives for a table the catalog does not have, or whose
  columns/keys differ from the registered ones (``types.comparison_key``): one job
  appended to the history with the table info and **no binlog**. The drainer applies such a
  job silently while catching up to the next DML binlog's schema version; nothing runs
  downstream. A new table gets ``CREATE TABLE`` (with ``CREATE DATABASE`` first for a new
  database), a changed one an ``ALTER`` job (``MODIFY_COLUMN``) keeping its table id;
* a real DDL (``Ddl`` in a Txn) is a job of type ``NONE`` (0) carrying the statement, the
  database and the table name but no table info (the new columns are not known until a row
  shows them), then a DDL binlog: the drainer executes the query and its schema is unchanged.
  Example: ``ALTER TABLE t ADD c`` -> job v7 (type 0) + DDL binlog; the next row of ``t``
  with column ``c`` -> job v8 (t with c, ``c`` a new column id) and the row at version 8.

Invariants: a job is stored before any binlog names its version or id; every registration is
an ``append_job`` whose schema version is exactly one past the newest version this catalog has
read, so it is built from the current state (else the catalog re-reads the history and
decides again: two sinks registering the same table concurrently end with one job, or two
consistent ones). A binlog's schema version is the catalog's version after its tables were
resolved, at which every table it writes has the info its rows were encoded with.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from tributary.change import Ddl
from tributary.change import TableInfo as SinkTable
from tributary.ddlhistory import (
    Action,
    Counter,
    DbInfo,
    DdlHistoryError,
    DdlJob,
    JobState,
    KvDdlHistory,
    SchemaState,
    ddl_job,
)
from tributary.sinks.port import SinkError
from tributary.sinks.pump.rows import Table
from tributary.sinks.pump.schema import HistoryCatalog
from tributary.sinks.pump.types import comparison_key, tidb_table

log = logging.getLogger(__name__)


class _Stale(Exception):
    """Another writer appended a job since this catalog last read the history."""


class PumpCatalog:
    def __init__(self, history: KvDdlHistory, *, attempts: int = 50) -> None:
        self._history = history
        self._schema = HistoryCatalog()
        self._counter = 0  # the schema-version counter as of the last read
        self._attempts = attempts
        self._resolved: dict[tuple[str, str], tuple[SinkTable, Table]] = {}

    @property
    def version(self) -> int:
        return self._schema.version

    async def load(self) -> None:
        """Read the history's jobs this catalog has not applied yet."""
        try:
            counter = await self._history.ids.current(Counter.SCHEMA_VERSION)
            self._schema.apply_all(await self._history.jobs_since(self._schema.version))
        except DdlHistoryError as e:
            raise SinkError(f"reading the DDL history: {e}", retriable=e.retriable) from e
        self._counter = max(counter, self._schema.version)
        self._resolved.clear()

    async def resolve(self, table: SinkTable) -> Table:
        """The registered table to encode ``table``'s rows with (registering it if needed)."""
        name = (table.schema.lower(), table.table.lower())
        cached = self._resolved.get(name)
        if cached is not None and cached[0] is table:
            return cached[1]
        want = comparison_key(table)
        for _ in range(self._attempts):
            current = self._schema.table(table.schema, table.table)
            if current is not None and comparison_key(current.sink) == want:
                self._resolved[name] = (table, current)
                return current
            try:
                await self._register(table, current)
            except _Stale:
                await self.load()
        raise SinkError(
            f"registering {table.qualified}: the DDL history keeps moving", retriable=True
        )

    async def record_ddl(self, ddl: Ddl) -> DdlJob:
        """Append the job of a real DDL (see the module docstring)."""
        for _ in range(self._attempts):
            db = self._schema.database(ddl.schema) if ddl.schema else None
            make = functools.partial(
                _ddl_job, await self._allocate(Counter.JOB_ID), ddl, db.id if db else 0
            )
            try:
                return await self._append(make)
            except _Stale:
                await self.load()
        raise SinkError(f"DDL {ddl.query!r}: the DDL history keeps moving", retriable=True)

    async def _register(self, table: SinkTable, current: Table | None) -> None:
        db = self._schema.database(table.schema)
        if db is None:
            db = DbInfo(
                await self._allocate(Counter.TABLE_ID), table.schema, "utf8mb4", "utf8mb4_bin"
            )
            query = f"CREATE DATABASE {table.schema}"
            job_id = await self._allocate(Counter.JOB_ID)
            await self._append(lambda v: ddl_job(job_id, Action.CREATE_SCHEMA, v, db, None, query))
            log.info("registered database %s (id %d)", db.name, db.id)
        if current is None:
            info = tidb_table(await self._allocate(Counter.TABLE_ID), table, None)
            action = Action.CREATE_TABLE
        else:
            info = tidb_table(current.id, table, current.info)
            action = Action.MODIFY_COLUMN
        job_id = await self._allocate(Counter.JOB_ID)
        query = f"-- pump sink: table {table.qualified} as its rows now are"
        job = await self._append(lambda v: ddl_job(job_id, action, v, db, info, query))
        log.info(
            "registered %s (table id %d) at schema version %d",
            table.qualified,
            info.id,
            job.schema_version,
        )

    async def _allocate(self, counter: Counter) -> int:
        try:
            return await self._history.ids.allocate(counter)
        except DdlHistoryError as e:
            raise SinkError(f"allocating a {counter.value}: {e}", retriable=e.retriable) from e

    async def _append(self, make: Callable[[int], DdlJob]) -> DdlJob:
        expected = self._counter + 1

        def checked(v: int) -> DdlJob:
            if v != expected:
                raise _Stale
            return make(v)

        try:
            job = await self._history.append_job(checked)
        except DdlHistoryError as e:
            raise SinkError(f"appending to the DDL history: {e}", retriable=e.retriable) from e
        self._counter = job.schema_version
        self._schema.apply(job)
        self._resolved.clear()
        return job


def _ddl_job(job_id: int, ddl: Ddl, schema_id: int, version: int) -> DdlJob:
    return DdlJob(
        id=job_id,
        type=Action.NONE,
        schema_id=schema_id,
        table_id=0,
        schema_name=ddl.schema,
        table_name=ddl.table,
        query=ddl.query,
        state=JobState.SYNCED,
        schema_version=version,
        schema_state=SchemaState.PUBLIC,
    )
