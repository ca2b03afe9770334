"""A transaction's row changes as TiDB writes them into a P-binlog's ``PrewriteValue``.

One ``TableMutation`` per table, in the order the tables were first written; in each, the rows
in TiDB's layouts (reference §1.1) and ``sequence`` naming the kind of each row in statement
order:

* inserted row = the handle datum, then every public column (``encode_inserted_row``);
* updated row  = the full old row, then the full new row (``encode_updated_row``);
* deleted row  = the full old row (``encode_deleted_row``).

The handle is the integer primary key when the table has one (``pk_is_handle``); otherwise TiDB
uses a hidden ``_tidb_rowid``, which updated and deleted rows also carry as column
``EXTRA_HANDLE_ID``. Rows carry the public columns (the workload has no generated ones).
Our upstream has no such column, so the row id is a stable 63-bit hash of
the row's key (primary key, else first unique key, else the whole row); the workload never
changes a key of such a table, so a row keeps its id. As in TiDB, an update that changes an
integer handle is written as a delete of the old row and an insert of the new one.
Example: account 7 moving from 1000 to 900 gives one updated row
``1, 7, 2, 1000 | 1, 7, 2, 900`` in table 40's mutation, ``sequence = [Update]``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from ddlhistory import TableInfo
from pumpclient.codec import varint
from tidbcodec import (
    EXTRA_HANDLE_ID,
    Datum,
    IntDatum,
    encode_deleted_row,
    encode_inserted_row,
    encode_updated_row,
    to_datum,
)
from wire.binlog import MutationType
from workload.catalog import Table
from workload.textvalues import Value

Row = Mapping[str, Value]

INSERT = int(MutationType.Insert)
UPDATE = int(MutationType.Update)
DELETE = int(MutationType.DeleteRow)
_MASK63 = (1 << 63) - 1


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
        mutation.inserted.append(encode_inserted_row([IntDatum(handle)], _columns(table, row)))
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
