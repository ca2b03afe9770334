"""A transaction's row changes as TiDB writes them into a P-binlog's ``PrewriteValue``.

Shared by every writer of binlogs into pumps: the load generator (``workload``) and the
``pump://`` sink. One ``TableMutation`` per table, in the order the tables were first written;
in each, the rows in TiDB's layouts (reference §1.1) and ``sequence`` naming the kind of each
row in statement order:

* inserted row = the handle datum, then every public column (``encode_inserted_row``);
* updated row  = the full old row, then the full new row (``encode_updated_row``);
* deleted row  = the full old row (``encode_deleted_row``).

The handle is the integer primary key when the table has one (``pk_is_handle``); otherwise TiDB
uses a hidden ``_tidb_rowid``, which updated and deleted rows also carry as column
``EXTRA_HANDLE_ID``. Rows carry the public, non-generated columns. Our writers have no such
hidden column, so the row id is a stable 63-bit hash of the row's key (primary key, else first
unique key, else the whole row); an update keeps the old row's id (readers of keyless tables
identify rows by their values, never by this id). As in TiDB, an update that changes an
integer handle is written as a delete of the old row and an insert of the new one.
Example: account 7 moving from 1000 to 900 gives one updated row
``1, 7, 2, 1000 | 1, 7, 2, 900`` in table 40's mutation, ``sequence = [Update]``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tributary.change import TableInfo as SinkTable
from tributary.ddlhistory import ColumnInfo, TableInfo
from tributary.sinks.pump.values import Value
from tributary.tidbcodec import (
    EXTRA_HANDLE_ID,
    Datum,
    IntDatum,
    encode_deleted_row,
    encode_inserted_row,
    encode_updated_row,
    to_datum,
)
from tributary.varint import varint
from tributary.wire.binlog import MutationType

Row = Mapping[str, Value]

INSERT = int(MutationType.Insert)
UPDATE = int(MutationType.Update)
DELETE = int(MutationType.DeleteRow)
_MASK63 = (1 << 63) - 1
_UINT64 = 1 << 64


class BinlogWriter(Protocol):
    """The part of ``pumpclient.PumpsClient`` a writer uses."""

    async def prewrite(
        self,
        start_ts: int,
        prewrite_value: bytes,
        prewrite_key: bytes = ...,
        ddl_query: bytes = ...,
        ddl_job_id: int = ...,
    ) -> None: ...

    async def commit(self, start_ts: int, commit_ts: int) -> None: ...

    async def rollback(self, start_ts: int) -> None: ...


def sink_table(schema: str, info: TableInfo) -> SinkTable:
    """The table as sinks see it (what a drainer builds from the same table info)."""
    return SinkTable.build(
        schema,
        info.name,
        [(c.name, c.mysql_type) for c in info.row_columns],
        [c.name for c in info.primary_key],
        {name: [c.name for c in key] for name, key in info.unique_keys.items()},
    )


@dataclass(frozen=True, slots=True)
class Table:
    """A table as a binlog writer sees it. Derived once (rows are encoded many times):
    ``columns`` (public, non-generated: what rows carry), ``key`` (the columns identifying a
    row: the primary key, else the first unique key, else all) and ``sink`` (for sinks)."""

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


def row_id(table: Table, row: Row) -> int:
    """The handle of ``row``: its integer primary key, or the stand-in ``_tidb_rowid``."""
    if table.info.pk_is_handle:
        (name,) = table.key
        value = row[name]
        if not isinstance(value, int):
            raise TypeError(f"{table.qualified}.{name}: handle {value!r} is not an int")
        return value
    key = repr([row.get(n) for n in table.key]).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") & _MASK63


def _handle(value: int) -> IntDatum:
    """The handle datum: TiDB keeps handles as int64 (a BIGINT UNSIGNED key wraps around)."""
    return IntDatum(value - _UINT64 if value > _MASK63 else value)


def _columns(table: Table, row: Row) -> list[tuple[int, Datum]]:
    return [(c.id, to_datum(row.get(c.name), c.ft)) for c in table.columns]


def _repeated(tag: bytes, items: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for item in items:
        out += (tag, varint(len(item)), item)
    return out


@dataclass(slots=True)
class _Mutation:
    """A ``TableMutation`` being built; marshalled by hand (betterproto's attribute machinery
    costs more than the rest of a transaction's encoding): fields 1, 2, 3, 6 and 7 of tipb's
    binlog.proto, ``sequence`` unpacked as gogoproto writes proto2 repeated enums."""

    table_id: int
    inserted: list[bytes] = field(default_factory=list)
    updated: list[bytes] = field(default_factory=list)
    deleted: list[bytes] = field(default_factory=list)
    sequence: list[int] = field(default_factory=list)

    def encode(self) -> bytes:
        parts = [b"\x08", varint(self.table_id)]
        parts += _repeated(b"\x12", self.inserted)
        parts += _repeated(b"\x1a", self.updated)
        parts += _repeated(b"\x32", self.deleted)
        for kind in self.sequence:
            parts += (b"\x38", varint(kind))
        return b"".join(parts)


class MutationBuilder:
    """Collects one transaction's row changes; :meth:`encode` gives the PrewriteValue."""

    def __init__(self) -> None:
        self._mutations: dict[int, _Mutation] = {}
        self.rows = 0
        self.first_key = b""  # TiDB's primary lock key: the first row written

    def _mutation(self, info: TableInfo, handle: int) -> _Mutation:
        if not self.first_key:
            self.first_key = b"t%d_r%d" % (info.id, handle)
        self.rows += 1
        mutation = self._mutations.get(info.id)
        if mutation is None:
            mutation = self._mutations[info.id] = _Mutation(info.id)
        return mutation

    def insert(self, table: Table, row: Row) -> None:
        handle = row_id(table, row)
        mutation = self._mutation(table.info, handle)
        mutation.inserted.append(encode_inserted_row([_handle(handle)], _columns(table, row)))
        mutation.sequence.append(INSERT)

    def update(self, table: Table, old: Row, new: Row) -> None:
        info = table.info
        handle = row_id(table, old)
        if info.pk_is_handle and row_id(table, new) != handle:
            self.delete(table, old)
            self.insert(table, new)
            return
        old_cols, new_cols = _columns(table, old), _columns(table, new)
        if not info.pk_is_handle:
            old_cols.append((EXTRA_HANDLE_ID, IntDatum(handle)))
            new_cols.append((EXTRA_HANDLE_ID, IntDatum(handle)))
        mutation = self._mutation(info, handle)
        mutation.updated.append(encode_updated_row(old_cols, new_cols))
        mutation.sequence.append(UPDATE)

    def delete(self, table: Table, old: Row) -> None:
        handle = row_id(table, old)
        cols = _columns(table, old)
        if not table.info.pk_is_handle:
            cols.append((EXTRA_HANDLE_ID, IntDatum(handle)))
        mutation = self._mutation(table.info, handle)
        mutation.deleted.append(encode_deleted_row(cols))
        mutation.sequence.append(DELETE)

    def encode(self, schema_version: int) -> bytes:
        """The marshalled ``PrewriteValue{schema_version = 1, mutations = 2}``."""
        parts = [b"\x08", varint(schema_version)]
        parts += _repeated(b"\x12", [m.encode() for m in self._mutations.values()])
        return b"".join(parts)
