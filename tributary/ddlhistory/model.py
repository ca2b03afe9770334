"""TiDB's DDL job and schema objects, the subset a drainer needs (``model.Job``, ``TableInfo``).

A ``DdlJob`` is what TiDB keeps in its DDL history: the job's type and state, the statement,
and the ``binlog`` part: the schema version the job finished at with the database or table
info as of that version. Column ids are stable for the life of a column, so rows (which carry
column ids) can be read with the table info of the schema version they were written at.

Invariant: the objects are immutable values; ``jobjson`` maps them to and from TiDB's job JSON
without loss for the fields modelled here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tributary.ddlhistory.typename import mysql_type
from tributary.tidbcodec.mysqltypes import PRI_KEY_FLAG, ColumnType

JsonScalar = str | int | float | bool | None


class JobState(enum.IntEnum):
    """``model.JobState``."""

    NONE = 0
    RUNNING = 1
    ROLLINGBACK = 2
    ROLLBACK_DONE = 3
    DONE = 4
    CANCELLED = 5
    SYNCED = 6
    CANCELLING = 7
    QUEUEING = 8
    PAUSED = 9
    PAUSING = 10


class SchemaState(enum.IntEnum):
    """``model.SchemaState`` of a schema element (and of a job step)."""

    NONE = 0
    DELETE_ONLY = 1
    WRITE_ONLY = 2
    WRITE_REORGANIZATION = 3
    DELETE_REORGANIZATION = 4
    PUBLIC = 5


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    id: int
    name: str  # the original spelling (TiDB's ``name.O``)
    offset: int
    ft: ColumnType
    state: int = SchemaState.PUBLIC
    default: JsonScalar = None
    origin_default: JsonScalar = None  # the value rows written before the column existed get
    generated_expr: str = ""  # non-empty for a generated column

    @property
    def is_public(self) -> bool:
        return self.state == SchemaState.PUBLIC

    @property
    def is_generated(self) -> bool:
        return bool(self.generated_expr)

    @property
    def has_pk_flag(self) -> bool:
        return bool(self.ft.flag & PRI_KEY_FLAG)

    @property
    def mysql_type(self) -> str:
        return mysql_type(self.ft)


@dataclass(frozen=True, slots=True)
class IndexColumn:
    name: str
    offset: int
    length: int = -1  # a prefix length, -1 for the whole column


@dataclass(frozen=True, slots=True)
class IndexInfo:
    id: int
    name: str
    columns: tuple[IndexColumn, ...]
    unique: bool = False
    primary: bool = False
    state: int = SchemaState.PUBLIC


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    columns: tuple[ColumnInfo, ...]
    indices: tuple[IndexInfo, ...] = ()
    pk_is_handle: bool = False  # an integer primary key is the row handle
    is_common_handle: bool = False  # a clustered (non-integer) primary key is the row handle
    charset: str = ""
    collate: str = ""
    state: int = SchemaState.PUBLIC

    def column(self, name: str) -> ColumnInfo | None:
        """The column named ``name`` (case-insensitive, as MySQL column names are)."""
        lower = name.lower()
        return next((c for c in self.columns if c.name.lower() == lower), None)

    @property
    def row_columns(self) -> tuple[ColumnInfo, ...]:
        """The columns a replica writes: public and not generated."""
        return tuple(c for c in self.columns if c.is_public and not c.is_generated)

    def _key_columns(self, index: IndexInfo) -> tuple[ColumnInfo, ...] | None:
        """The index's columns, or None if one of them is not a writable column."""
        writable = {c.name.lower(): c for c in self.row_columns}
        cols = [writable.get(ic.name.lower()) for ic in index.columns]
        return tuple(c for c in cols if c is not None) if None not in cols else None

    @property
    def primary_key(self) -> tuple[ColumnInfo, ...]:
        """The primary key's columns: the primary index, or the integer handle column."""
        index = next((i for i in self.indices if i.primary), None)
        if index is not None:
            return (self._key_columns(index) or ()) if index.state == SchemaState.PUBLIC else ()
        return tuple(c for c in self.row_columns if self.pk_is_handle and c.has_pk_flag)

    @property
    def unique_keys(self) -> dict[str, tuple[ColumnInfo, ...]]:
        """Public unique (non-primary) indexes over writable columns, by index name."""
        keys = {}
        for index in self.indices:
            if index.unique and not index.primary and index.state == SchemaState.PUBLIC:
                cols = self._key_columns(index)
                if cols:
                    keys[index.name] = cols
        return keys

    @property
    def handle_columns(self) -> tuple[ColumnInfo | None, ...]:
        """The column each handle datum of an inserted row holds (None: no column).

        An integer primary key handle is its column; a clustered primary key is its columns
        (a prefix-indexed column holds only a prefix: None); otherwise the handle is the
        hidden ``_tidb_rowid``.
        """
        index = next((i for i in self.indices if i.primary), None)
        if self.is_common_handle and index is not None:
            return tuple(None if ic.length != -1 else self.column(ic.name) for ic in index.columns)
        if self.pk_is_handle:
            return (next((c for c in self.columns if c.has_pk_flag), None),)
        return (None,)


@dataclass(frozen=True, slots=True)
class DbInfo:
    id: int
    name: str
    charset: str = ""
    collate: str = ""
    state: int = SchemaState.PUBLIC


@dataclass(frozen=True, slots=True)
class DdlJob:
    """A finished (or cancelled) DDL job as the history keeps it."""

    id: int
    type: int  # an ``Action`` value; unknown future types stay plain ints
    schema_id: int
    table_id: int
    schema_name: str
    query: str
    state: int  # a ``JobState`` value
    schema_version: int  # ``binlog.SchemaVersion``: the version the job finished at
    table_name: str = ""
    schema_state: int = SchemaState.NONE
    db_info: DbInfo | None = None  # ``binlog.DBInfo`` (database jobs)
    table_info: TableInfo | None = None  # ``binlog.TableInfo`` (table jobs)
    multiple_table_infos: tuple[TableInfo, ...] = ()  # ``binlog.multiple_table_infos``
    finished_ts: int = 0

    @property
    def is_done(self) -> bool:
        """Done or synced: the change took effect (cancelled and rolled-back jobs did not)."""
        return self.state in (JobState.DONE, JobState.SYNCED)
