"""The upstream schema as the drainer tracks it: databases and every version of every table.

DDL jobs are applied in schema-version order; each table keeps the list of ``(version, table)``
it went through (``None`` once dropped), so a DML binlog is decoded with the table as it was at
the binlog's schema version (``table_at``), not the latest, and named as the latest names it
(``rows_table``: a late transaction's rows after a rename). Worked example, table 40::

    job 11 CREATE TABLE t (id, a)     v=3  -> versions [(3, t{id,a})]
    job 12 ALTER TABLE t ADD b        v=5  -> versions [(3, t{id,a}), (5, t{id,a,b})]
    table_at(40, 4) -> t{id,a} (latest version <= 4); table_at(40, 9) -> t{id,a,b};
    table_at(40, 2) -> UnknownTable (t did not exist yet)

Invariants: ``version`` only grows and every job at or below it was applied (or is not a
change: cancelled, rolled back); applying a job either updates the state completely or raises
``SchemaError`` with the state untouched; applying an already-applied job returns its earlier
result without changing anything. The ids of truncated tables are remembered: their DML is
dropped (``is_truncated``), as tidb-binlog does.

The ``mysql`` database is known before any job (``MYSQL_DB``, id 1): TiDB 6.2 and later create
it directly in the store, with no DDL job, so the history holds jobs for its tables (``CREATE
TABLE mysql.user``, upgrade jobs) but never its creation. tidb-binlog's drainer seeds it the
same way. A history that does create database 1 (an older TiDB, or our own writers, whose
first database may take id 1) replaces the seed with the job's database, once::

    TiDB 6.2+: (seeded)                              dbs {1: mysql}
               job 3 CREATE TABLE user (schema 1)    -> table mysql.user
    our writers: job 1 CREATE DATABASE shop (id 1)   dbs {1: shop}, the seed replaced
                 job 2 CREATE DATABASE x (id 1)      -> SchemaError: already exists
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from services.drainer.errors import DrainerError
from services.drainer.rowvalues import Decoder, row_decoder
from tributary.change import TableInfo
from tributary.ddlhistory import (
    NOT_REPLICATED,
    TABLE_CHANGES,
    Action,
    DbInfo,
    DdlJob,
    SchemaState,
)
from tributary.ddlhistory import TableInfo as TidbTable
from tributary.tidbcodec import ColumnType

log = logging.getLogger(__name__)

MAX_GLOBAL_ID = (1 << 48) - 1 - 1000  # meta.MaxGlobalID: larger ids are TiDB's DDL system tables
# The database TiDB (6.2+) creates in its store without a DDL job, as TiDB defines it.
MYSQL_DB = DbInfo(1, "mysql", "utf8mb4", "utf8mb4_bin", SchemaState.PUBLIC)


class SchemaError(DrainerError):
    """A DDL job does not fit the tracked schema, or a table is not known."""


class UnknownTable(SchemaError):
    """No table with this id existed at the schema version asked for."""


@dataclass(frozen=True, slots=True)
class DecodeColumn:
    id: int
    name: str
    ft: ColumnType


@dataclass(frozen=True, slots=True)
class TrackedTable:
    """One version of a table: its TiDB info, its database, and what sinks see of it."""

    schema: str
    info: TidbTable
    sink: TableInfo
    columns: Mapping[int, DecodeColumn]  # public, non-generated columns by id, in table order
    handle: tuple[DecodeColumn | None, ...]  # what each handle datum of an inserted row fills
    partial: bool = False  # a row may lack some columns (``written_as``)
    _decoders: dict[dt.tzinfo, Decoder] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _narrow: dict[frozenset[str], TableInfo] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def id(self) -> int:
        return self.info.id

    def decoder(self, tz: dt.tzinfo) -> Decoder:
        """The compiled decoder of this version's rows, values shown in ``tz`` (built once)."""
        decoder = self._decoders.get(tz)
        if decoder is None:
            columns = [(c.id, c.name, c.ft) for c in self.columns.values()]
            handle = [None if c is None else (c.id, c.name, c.ft) for c in self.handle]
            decoder = self._decoders[tz] = row_decoder(columns, handle, tz)
        return decoder

    def written_as(self, down: TrackedTable) -> TrackedTable:
        """The table for rows TiDB wrote with this version, as the downstream has the table
        (``down``, another version of it): ``down``'s database, name, columns and keys, each
        column decoded with this version's type where it had the column. A column this version
        had and ``down`` lacks is left out; a column ``down`` has and this version lacked is
        read when a row holds it, so such a view is ``partial`` (see ``narrowed``).
        ``down`` itself when the two have the same columns."""
        mine = {c.id: c for c in self.info.columns}
        if [(c.id, c.name, c.ft) for c in down.info.row_columns] == [
            (c.id, c.name, c.ft) for c in self.info.row_columns
        ]:
            return down
        columns = tuple(
            replace(c, ft=mine[c.id].ft) if c.id in mine else c for c in down.info.columns
        )
        view = TrackedTable.build(down.schema, replace(down.info, columns=columns))
        known = {c.id for c in self.info.row_columns}
        return replace(view, partial=any(c.id not in known for c in down.info.row_columns))

    def narrowed(self, names: Collection[str]) -> TableInfo:
        """``sink`` cut to the columns a row holds (its keys kept when whole): rows of one
        definition always hold the same columns, which the sinks' statements rely on."""
        key = frozenset(names)
        table = self._narrow.get(key)
        if table is None:
            keep = [c for c in self.sink.columns if c.name in key]
            pk = self.sink.primary_key if key.issuperset(self.sink.primary_key) else ()
            uks = {u.name: u.columns for u in self.sink.unique_keys if key.issuperset(u.columns)}
            table = self._narrow[key] = TableInfo.build(
                self.sink.schema, self.sink.table, [(c.name, c.mysql_type) for c in keep], pk, uks
            )
        return table

    @classmethod
    def build(cls, schema: str, info: TidbTable) -> TrackedTable:
        """Raises ValueError when the keys do not fit the columns."""
        cols = {c.id: DecodeColumn(c.id, c.name, c.ft) for c in info.row_columns}
        handle = tuple(None if c is None else cols.get(c.id) for c in info.handle_columns)
        sink = TableInfo.build(
            schema,
            info.name,
            [(c.name, c.mysql_type) for c in info.row_columns],
            [c.name for c in info.primary_key],
            {name: [c.name for c in key] for name, key in info.unique_keys.items()},
        )
        return cls(schema, info, sink, cols, handle)


@dataclass(frozen=True, slots=True)
class AppliedDdl:
    """What a job changed, for the DDL sent downstream: database and table names."""

    schema: str
    table: str = ""


class SchemaTracker:
    def __init__(self) -> None:
        self._dbs: dict[int, DbInfo] = {MYSQL_DB.id: MYSQL_DB}
        self._db_tables: dict[int, set[int]] = {MYSQL_DB.id: set()}
        self._seeded = {MYSQL_DB.id}  # databases known without a job: a job may replace them
        self._versions: dict[int, list[tuple[int, TrackedTable | None]]] = {}
        self._truncated: set[int] = set()
        self._applied: dict[int, AppliedDdl | None] = {}
        self._changed: dict[int, tuple[int, ...]] = {}  # job id -> the table ids it changed
        self._putting: list[int] = []  # the table ids the job being applied changed
        self._shown: dict[int, int] = {}  # table id -> version of the last job shown for it
        self._written: dict[tuple[int, int, int], TrackedTable] = {}  # (id, then, now) -> view
        # Every job at or below this schema version has been applied, or was not in the
        # history yet when a binlog of a later version needed it: TiDB puts a job there after
        # its binlog, and rows of its version can come first (a multi-schema change); its own
        # binlog applies it then. Jobs are applied in version order (``_job_version``).
        self.version = 0
        self._job_version = 0

    def advance_to(self, schema_version: int) -> None:
        """Record that no job between ``version`` and ``schema_version`` is left to apply."""
        self.version = max(self.version, schema_version)

    def is_applied(self, job_id: int) -> bool:
        return job_id in self._applied

    def is_truncated(self, table_id: int) -> bool:
        return table_id in self._truncated

    def database(self, schema_id: int) -> DbInfo | None:
        return self._dbs.get(schema_id)

    def table_at(self, table_id: int, schema_version: int) -> TrackedTable:
        """The table ``table_id`` as it was at ``schema_version``; raises ``UnknownTable``."""
        return self._entry_at(table_id, schema_version)[1]

    def rows_table(self, table_id: int, schema_version: int) -> TrackedTable:
        """The table to decode and write the rows of ``table_id`` in a DML binlog of
        ``schema_version`` with: the version TiDB wrote them with, as the downstream has the
        table (the version of the last job ``shown`` for it; ``TrackedTable.written_as``).

        A binlog's schema version is its transaction's start, and binlogs are translated in
        commit order, which does not follow the versions at a DDL:

        * TiDB's metadata lock lets a transaction that started before a DDL commit after the
          DDL's binlog (a *late* transaction), its rows in the table of its start; the
          downstream has run the DDL, so a column or the table renamed meanwhile (CHANGE
          COLUMN, RENAME TABLE) is written under its new name;
        * a table the transaction first touches after a DDL changed it is written with the
          table as it is then: rows of a table created (or truncated: a new id) after the
          transaction began are read with its first version, and a column added meanwhile is
          read when a row holds it;
        * a multi-schema change (``ALTER TABLE t ADD COLUMN a ..., ADD INDEX ...``) makes its
          columns public at its final version a step before the job is done and its binlog
          written: rows of that version come *first*, while the downstream has not got the
          columns, so they are left out (the downstream gives them their default when the
          DDL runs, as tidb-binlog's drainer, which decodes such rows with the older table).

        Worked example (a late transaction)::

            v43 t(id, a, b)   a transaction starts, inserts (2, 2, 'two')
            v44 ALTER TABLE t CHANGE b c   binlog at commit ts 100; the downstream runs it
            the transaction commits at 101, its binlog at version 43
            rows_table(t, 43) -> t(id, a, c): INSERT INTO t (id, a, c) VALUES (2, 2, 'two')
        """
        then, table = self._entry_for_rows(table_id, schema_version)
        shown = self._shown.get(table_id)
        if shown is None or shown == then:
            return table
        try:
            now, down = self._entry_at(table_id, shown)
        except UnknownTable:
            return table  # gone downstream: let the sink say what it makes of the rows
        if down is table:
            return table
        key = (table_id, then, now)
        view = self._written.get(key)
        if view is None:
            try:
                view = self._written[key] = table.written_as(down)
            except ValueError as e:
                raise SchemaError(f"table id {table_id} at version {then} as of {now}: {e}") from e
        return view

    def _entry_for_rows(self, table_id: int, schema_version: int) -> tuple[int, TrackedTable]:
        """``_entry_at``; for a table created after ``schema_version``, its first version."""
        try:
            return self._entry_at(table_id, schema_version)
        except UnknownTable:
            versions = self._versions.get(table_id)
            if not versions or versions[0][0] <= schema_version or versions[0][1] is None:
                raise
            return versions[0][0], versions[0][1]

    def _entry_at(self, table_id: int, schema_version: int) -> tuple[int, TrackedTable]:
        versions = self._versions.get(table_id)
        if not versions:
            raise UnknownTable(f"table id {table_id} is unknown to the schema")
        found = None
        for v, table in versions:
            if v > schema_version:
                break
            found = (v, table)
        if found is None:
            raise UnknownTable(
                f"table id {table_id} did not exist yet at schema version {schema_version}"
                f" (created at {versions[0][0]})"
            )
        if found[1] is None:
            raise UnknownTable(f"table id {table_id} was dropped at schema version {found[0]}")
        return found[0], found[1]

    def apply(self, job: DdlJob, *, shown: bool = True) -> AppliedDdl | None:
        """Apply a finished job; None when it changes nothing to replicate downstream.

        ``shown``: the downstream has the job's change (its binlog came, or a restarted
        drainer's history says it finished before the binlog being translated); False for a
        job whose binlog is still to come, which ``rows_table`` does not write rows by yet.
        Applying an applied job again with ``shown`` marks it shown."""
        if job.id in self._applied:
            if shown:
                self._show(job)
            return self._applied[job.id]
        if not job.is_done or job.schema_version <= 0:
            log.info(
                "skipping DDL job %d: state %d, version %d", job.id, job.state, job.schema_version
            )
            return None
        if job.schema_version <= self._job_version:
            raise SchemaError(
                f"DDL job {job.id} (schema version {job.schema_version}) arrived after a job"
                f" of version {self._job_version}"
            )
        result = None
        self._putting = []
        if job.type not in NOT_REPLICATED and job.table_id <= MAX_GLOBAL_ID:
            result = self._handler(job.type)(job)
        self._applied[job.id] = result
        self._job_version = job.schema_version
        self._changed[job.id] = tuple(self._putting)
        if shown:
            self._show(job)
        self.version = max(self.version, job.schema_version)
        log.info(
            "applied DDL job %d (type %d) at schema version %d", job.id, job.type, self.version
        )
        return result

    def _show(self, job: DdlJob) -> None:
        for table_id in self._changed.get(job.id, ()):
            self._shown[table_id] = max(self._shown.get(table_id, 0), job.schema_version)

    def _handler(self, action: int) -> Callable[[DdlJob], AppliedDdl]:
        handlers: dict[int, Callable[[DdlJob], AppliedDdl]] = {
            Action.CREATE_SCHEMA: self._create_schema,
            Action.MODIFY_SCHEMA_CHARSET_AND_COLLATE: self._modify_schema,
            Action.DROP_SCHEMA: self._drop_schema,
            Action.CREATE_TABLE: self._create_table,
            Action.CREATE_VIEW: self._create_table,
            Action.CREATE_SEQUENCE: self._create_table,
            Action.RECOVER_TABLE: self._create_table,
            Action.CREATE_TABLES: self._create_tables,
            Action.DROP_TABLE: self._drop_table,
            Action.DROP_VIEW: self._drop_table,
            Action.DROP_SEQUENCE: self._drop_table,
            Action.TRUNCATE_TABLE: self._truncate_table,
            Action.RENAME_TABLE: self._rename_table,
            Action.RENAME_TABLES: self._rename_tables,
        }
        return handlers.get(action, self._alter_table)

    # --- lookups (they raise before anything changes) ---

    def _db(self, schema_id: int) -> DbInfo:
        db = self._dbs.get(schema_id)
        if db is None:
            raise SchemaError(f"database id {schema_id} is unknown to the schema")
        return db

    def _live(self, table_id: int) -> tuple[int, TrackedTable]:
        """(database id, current version) of an existing table."""
        versions = self._versions.get(table_id)
        table = versions[-1][1] if versions else None
        db_id = next((db for db, ids in self._db_tables.items() if table_id in ids), None)
        if table is None or db_id is None:
            raise SchemaError(f"table id {table_id} does not exist in the schema")
        return db_id, table

    def _absent(self, info: TidbTable) -> None:
        versions = self._versions.get(info.id)
        if versions and versions[-1][1] is not None:
            raise SchemaError(f"table id {info.id} ({info.name}) already exists")

    @staticmethod
    def _table_info(job: DdlJob) -> TidbTable:
        if job.table_info is None:
            raise SchemaError(f"DDL job {job.id} (type {job.type}) carries no table info")
        return job.table_info

    @staticmethod
    def _build(schema: str, info: TidbTable) -> TrackedTable:
        try:
            return TrackedTable.build(schema, info)
        except ValueError as e:
            raise SchemaError(f"table {schema}.{info.name} (id {info.id}): {e}") from e

    # --- changes: everything is looked up and built first, then the state changes ---

    def _put(self, db_id: int, table_id: int, table: TrackedTable | None, version: int) -> None:
        self._putting.append(table_id)
        self._versions.setdefault(table_id, []).append((version, table))
        for ids in self._db_tables.values():
            ids.discard(table_id)
        if table is not None:
            self._db_tables[db_id].add(table_id)

    def _create_schema(self, job: DdlJob) -> AppliedDdl:
        db = job.db_info
        if db is None:
            raise SchemaError(f"DDL job {job.id} (create database) carries no database info")
        if db.id in self._dbs and db.id not in self._seeded:
            raise SchemaError(f"database id {db.id} ({db.name}) already exists")
        if db.id in self._seeded:
            log.info("DDL job %d creates the seeded database id %d as %s", job.id, db.id, db.name)
        self._seeded.discard(db.id)
        self._dbs[db.id] = db
        self._db_tables.setdefault(db.id, set())
        return AppliedDdl(db.name)

    def _modify_schema(self, job: DdlJob) -> AppliedDdl:
        db = job.db_info
        if db is None:
            raise SchemaError(f"DDL job {job.id} (alter database) carries no database info")
        self._db(db.id)
        self._seeded.discard(db.id)
        self._dbs[db.id] = db
        return AppliedDdl(db.name)

    def _drop_schema(self, job: DdlJob) -> AppliedDdl:
        db = self._db(job.schema_id)
        for table_id in sorted(self._db_tables[db.id]):
            self._put(db.id, table_id, None, job.schema_version)
        del self._dbs[db.id], self._db_tables[db.id]
        self._seeded.discard(db.id)
        return AppliedDdl(db.name)

    def _create_table(self, job: DdlJob) -> AppliedDdl:
        db, info = self._db(job.schema_id), self._table_info(job)
        self._absent(info)
        self._put(db.id, info.id, self._build(db.name, info), job.schema_version)
        return AppliedDdl(db.name, info.name)

    def _create_tables(self, job: DdlJob) -> AppliedDdl:
        db = self._db(job.schema_id)
        for info in job.multiple_table_infos:
            self._absent(info)
        tables = [self._build(db.name, info) for info in job.multiple_table_infos]
        for table in tables:
            self._put(db.id, table.id, table, job.schema_version)
        return AppliedDdl(db.name, tables[-1].info.name if tables else "")

    def _drop_table(self, job: DdlJob) -> AppliedDdl:
        db_id, table = self._live(job.table_id)
        self._put(db_id, job.table_id, None, job.schema_version)
        return AppliedDdl(table.schema, table.info.name)

    def _truncate_table(self, job: DdlJob) -> AppliedDdl:
        # The job's table id is the old one; its table info carries the new id.
        info = self._table_info(job)
        db_id, old = self._live(job.table_id)
        if info.id != job.table_id:
            self._absent(info)
        new = self._build(old.schema, info)
        self._put(db_id, job.table_id, None, job.schema_version)
        self._truncated.add(job.table_id)
        self._put(db_id, info.id, new, job.schema_version)
        return AppliedDdl(old.schema, info.name)

    def _rename_table(self, job: DdlJob) -> AppliedDdl:
        db, info = self._db(job.schema_id), self._table_info(job)
        self._live(info.id)
        self._put(db.id, info.id, self._build(db.name, info), job.schema_version)
        return AppliedDdl(db.name, info.name)

    def _rename_tables(self, job: DdlJob) -> AppliedDdl:
        # Each table's new database is only in the job's arguments: the names change, the
        # database stays (a cross-database RENAME TABLES is not tracked).
        live = [self._live(info.id) for info in job.multiple_table_infos]
        new = [
            self._build(t.schema, i)
            for (_, t), i in zip(live, job.multiple_table_infos, strict=True)
        ]
        for (db_id, _), table in zip(live, new, strict=True):
            self._put(db_id, table.id, table, job.schema_version)
        return AppliedDdl(new[-1].schema, new[-1].info.name) if new else AppliedDdl("")

    def _alter_table(self, job: DdlJob) -> AppliedDdl:
        if job.table_info is None and job.type not in TABLE_CHANGES:
            # type 0 (ActionNone) is how writers such as the pump sink pass a statement whose
            # schema change a later job describes: expected, so not a warning
            level = logging.DEBUG if job.type == Action.NONE else logging.WARNING
            log.log(
                level,
                "DDL job %d of type %d carries no table info; schema unchanged",
                job.id,
                job.type,
            )
            return AppliedDdl(job.schema_name, job.table_name)
        info = self._table_info(job)
        db_id, old = self._live(info.id)
        self._put(db_id, info.id, self._build(old.schema, info), job.schema_version)
        return AppliedDdl(old.schema, info.name)
