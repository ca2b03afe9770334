"""What the workload knows of the upstream schema: databases, tables (TiDB table infos), the
schema version, and one read/write lock per table.

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
from dataclasses import dataclass, field

from ddlhistory import Action, ColumnInfo, DbInfo, DdlHistory, DdlJob, TableInfo
from sinks.model import TableInfo as SinkTable
from workload.rwlock import RwLock

log = logging.getLogger(__name__)


def sink_table(schema: str, info: TableInfo) -> SinkTable:
    """The table as the SQL text builders of ``sinks.sql`` see it (what a drainer builds)."""
    return SinkTable.build(
        schema,
        info.name,
        [(c.name, c.mysql_type) for c in info.row_columns],
        [c.name for c in info.primary_key],
        {name: [c.name for c in key] for name, key in info.unique_keys.items()},
    )


@dataclass(frozen=True, slots=True)
class Table:
    """A table of the catalog. Derived once (rows are encoded many times): ``columns``
    (public, non-generated: what rows carry), ``key`` (the columns identifying a row: the
    primary key, else the first unique key, else all) and ``sink`` (for ``sinks.sql``)."""

    schema: str
    info: TableInfo
    columns: tuple[ColumnInfo, ...] = field(init=False, repr=False, compare=False)
    key: tuple[str, ...] = field(init=False, repr=False, compare=False)
    sink: SinkTable = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        info = self.info
        keys = [k for k in (info.primary_key, *info.unique_keys.values()) if k]
        key = keys[0] if keys else info.row_columns
        object.__setattr__(self, "columns", info.row_columns)
        object.__setattr__(self, "key", tuple(c.name for c in key))
        object.__setattr__(self, "sink", sink_table(self.schema, info))

    @property
    def id(self) -> int:
        return self.info.id

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.info.name}"


class Catalog:
    def __init__(self) -> None:
        self.version = 0
        self._dbs: dict[int, DbInfo] = {}
        self._tables: dict[int, Table] = {}
        self._locks: dict[int, RwLock] = {}
        self.ddl_lock = asyncio.Lock()  # one DDL at a time, as TiDB's DDL owner runs them

    @classmethod
    async def load(cls, history: DdlHistory) -> Catalog:
        catalog = cls()
        for job in await history.jobs_since(0):
            catalog.apply(job)
        log.info("catalog at schema version %d: %d tables", catalog.version, len(catalog._tables))
        return catalog

    # -- lookups --------------------------------------------------------------

    def database(self, name: str) -> DbInfo | None:
        return next((d for d in self._dbs.values() if d.name.lower() == name.lower()), None)

    def table(self, schema: str, name: str) -> Table | None:
        s, n = schema.lower(), name.lower()
        return next(
            (t for t in self._tables.values() if t.schema.lower() == s and t.name.lower() == n),
            None,
        )

    def table_by_id(self, table_id: int) -> Table | None:
        return self._tables.get(table_id)

    def tables(self, schema: str) -> list[Table]:
        return sorted(
            (t for t in self._tables.values() if t.schema.lower() == schema.lower()),
            key=lambda t: t.id,
        )

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

    # -- applying jobs --------------------------------------------------------

    def apply(self, job: DdlJob) -> None:
        """Apply a finished job (others are skipped); the version moves to the job's."""
        if not job.is_done or job.schema_version <= 0:
            return
        info, action = job.table_info, job.type
        if action == Action.CREATE_SCHEMA and job.db_info is not None:
            self._dbs[job.db_info.id] = job.db_info
        elif action == Action.DROP_SCHEMA:
            self._dbs.pop(job.schema_id, None)
            for t in [t for t in self._tables.values() if t.schema == job.schema_name]:
                del self._tables[t.id]
        elif action in (Action.DROP_TABLE, Action.DROP_VIEW):
            self._tables.pop(job.table_id, None)
        elif info is not None:
            old = self._tables.pop(job.table_id, None)
            db = self._dbs.get(job.schema_id)
            schema = db.name if db is not None else old.schema if old else job.schema_name
            self._tables[info.id] = Table(schema, info)
        self.version = max(self.version, job.schema_version)
