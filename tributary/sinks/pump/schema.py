"""The upstream schema as the DDL history says it is: databases, tables and the schema version.

Shared by the binlog writers that keep their schema in the history (the load generator's
``Catalog`` and the ``pump://`` sink's ``PumpCatalog``): replaying the history's jobs in
schema-version order rebuilds it, so a restarted writer continues on the tables written before.
Invariant: ``version`` is the schema version of the newest job applied and every table is the
one of that version. Jobs that are not done (cancelled, rolled back) are skipped; a job
carrying no table info (a DDL whose table info is not known) changes nothing but the version.
Example: jobs ``v1 CREATE DATABASE shop (id 2)``, ``v2 CREATE TABLE shop.t (id 3)``,
``v3 ALTER TABLE t ADD c`` -> ``table("shop", "t")`` is table 3 with column c, version 3.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tributary.ddlhistory import Action, DbInfo, DdlJob
from tributary.sinks.pump.rows import Table

log = logging.getLogger(__name__)


class HistoryCatalog:
    def __init__(self) -> None:
        self.version = 0
        self._dbs: dict[int, DbInfo] = {}
        self._tables: dict[int, Table] = {}

    def apply_all(self, jobs: Iterable[DdlJob]) -> None:
        for job in jobs:
            self.apply(job)

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
