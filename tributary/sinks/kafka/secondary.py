"""Transactions <-> tidb-binlog's secondary binlog (``slave.binlog.Binlog``), the Kafka messages.

``Txn`` -> bytes as tidb-binlog's ``TiBinlogToSecondaryBinlog`` does: a DDL is ``type = DDL`` with
``ddl_data`` {schema, table, the original query}; rows are ``type = DML`` with one ``Table`` per run
of consecutive row changes of one table (tidb-binlog: one per table mutation), each carrying the
column infos (bare type name as TiDB's ``TypeToStr``: ``bigint``, ``varchar``, ``blob``; flen,
decimal, primary-key flag) and the unique keys (``PRIMARY`` first). An update's ``row`` is the NEW
row and ``change_row`` the OLD one (tidb-binlog's translator and its arbiter read them so).
Column values as ``DatumToColumn``: integers int64 (uint64 when unsigned), float/double double,
decimal and temporal types (YEAR too) their text, BIT big-endian bytes, char/text types string,
binary/blob types bytes, ENUM the index and SET the bitmask as uint64, JSON its text as bytes,
NULL ``is_null = true``. A checkpoint-only Txn has no message (None).

The encoder is hand-written, not betterproto: the format is proto2, and readers test presence
(tidb-binlog's loader takes ``int64_value`` when it is set, even to 0; gogoproto refuses a
``TableMutation`` without its required ``type``), which betterproto's proto3-style encoder drops
for zero values. Example: ``INSERT t(id bigint) VALUES (0)`` gives the column ``10 00`` (field 2,
varint 0), never an empty column.

bytes -> ``Txn`` (``decode_txn``) reads with the generated classes: values come back as the sinks
take them, each table with a ``TableInfo`` from the message's column infos and keys. ENUM/SET come
back as their number (the message has no member list).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from decimal import Decimal

from tributary.change import Ddl, Row, RowChange, RowKind, SqlValue, TableInfo, Txn
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.port import SinkError
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.enumset import enum_index, set_mask
from tributary.varint import varint
from tributary.wire.slave.binlog import Binlog, BinlogType, Column, MutationType, Table


class SecondaryBinlogError(SinkError):
    """A transaction that cannot be written as a secondary binlog, or a message that is not one."""


# TiDB's TypeToStr: (text name, name with the binary charset)
_NAMES: dict[int, tuple[str, str]] = {
    mt.TYPE_TINY: ("tinyint", "tinyint"),
    mt.TYPE_SHORT: ("smallint", "smallint"),
    mt.TYPE_INT24: ("mediumint", "mediumint"),
    mt.TYPE_LONG: ("int", "int"),
    mt.TYPE_LONGLONG: ("bigint", "bigint"),
    mt.TYPE_FLOAT: ("float", "float"),
    mt.TYPE_DOUBLE: ("double", "double"),
    mt.TYPE_NEWDECIMAL: ("decimal", "decimal"),
    mt.TYPE_DATE: ("date", "date"),
    mt.TYPE_DATETIME: ("datetime", "datetime"),
    mt.TYPE_TIMESTAMP: ("timestamp", "timestamp"),
    mt.TYPE_DURATION: ("time", "time"),
    mt.TYPE_YEAR: ("year", "year"),
    mt.TYPE_BIT: ("bit", "bit"),
    mt.TYPE_JSON: ("json", "json"),
    mt.TYPE_ENUM: ("enum", "enum"),
    mt.TYPE_SET: ("set", "set"),
    mt.TYPE_STRING: ("char", "binary"),
    mt.TYPE_VARCHAR: ("varchar", "varbinary"),
    mt.TYPE_TINY_BLOB: ("tinytext", "tinyblob"),
    mt.TYPE_BLOB: ("text", "blob"),
    mt.TYPE_MEDIUM_BLOB: ("mediumtext", "mediumblob"),
    mt.TYPE_LONG_BLOB: ("longtext", "longblob"),
    mt.TYPE_GEOMETRY: ("geometry", "geometry"),
}
_INTS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
_TEXTUAL = frozenset({"date", "datetime", "time", "timestamp", "year", "decimal"})
_STRINGS = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BLOBS = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_LENGTH = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_DOUBLE = struct.Struct("<d")


def type_name(ct: ColType) -> str:
    """TiDB's ``TypeToStr`` for a column type: ``varchar(10) binary charset`` -> ``varbinary``."""
    if ct.tp is None:
        return "unknown"
    text, binary = _NAMES.get(ct.tp, ("unknown", "unknown"))
    return binary if ct.binary else text


def _flen_decimal(mysql_type: str) -> tuple[int, int]:
    m = _LENGTH.search(mysql_type) if not mysql_type.lower().startswith(("enum", "set")) else None
    if m is None:
        return -1, -1  # TiDB's UnspecifiedLength
    return int(m.group(1)), int(m.group(2) or 0)


# -- the wire ---------------------------------------------------------------------------------


def _tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _len(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + varint(len(payload)) + payload


def _uint(field: int, value: int) -> bytes:
    return _tag(field, 0) + varint(value)


def _column(value: SqlValue, name: str, ct: ColType, flen: int) -> bytes:
    if value is None:
        return b"\x08\x01"  # is_null = true
    if name in _INTS:
        if not isinstance(value, int):
            raise SecondaryBinlogError(f"integer column holds {type(value).__name__} {value!r}")
        return _uint(3 if ct.unsigned else 2, value)
    if name in ("float", "double"):
        if not isinstance(value, int | float | Decimal | str):
            raise SecondaryBinlogError(f"{name} column holds {type(value).__name__}")
        return _tag(4, 1) + _DOUBLE.pack(float(value))
    if name == "enum" or name == "set":
        if isinstance(value, int):
            return _uint(3, value)
        text = value.decode() if isinstance(value, bytes) else str(value)
        return _uint(3, enum_index(ct.elems, text) if name == "enum" else set_mask(ct.elems, text))
    if name == "bit":
        if isinstance(value, int):
            size = max((flen + 7) // 8 if flen > 0 else 1, (value.bit_length() + 7) // 8)
            value = value.to_bytes(size, "big")
        return _len(5, value if isinstance(value, bytes) else str(value).encode())
    if name in _BLOBS or name == "json":
        raw = value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")
        return _len(5, raw)
    # strings, temporal, decimal and anything else: the text
    raw = value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")
    return _len(6, raw)


def _text(value: SqlValue) -> str:
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def _row(values: Row, cols: list[tuple[str, str, ColType, int]]) -> bytes:
    get = values.get
    return b"".join(_len(1, _column(get(c), name, ct, flen)) for c, name, ct, flen in cols)


def _table_header(info: TableInfo) -> tuple[bytes, bytes, list[tuple[str, str, ColType, int]]]:
    """(fields 1-3 of ``Table``, field 5 (keys), the per-column encoding plan)."""
    out = [_len(1, info.schema.encode()), _len(2, info.table.encode())]
    plan = []
    for c in info.columns:
        ct = column_type(c.mysql_type)
        name = type_name(ct)
        flen, dec = _flen_decimal(c.mysql_type)
        plan.append((c.name, name, ct, flen))
        ci = (
            _len(1, c.name.encode())
            + _len(2, name.encode())
            + _uint(3, int(c.is_pk))
            + _uint(4, flen)
            + _uint(5, dec)
        )
        out.append(_len(3, ci))
    keys = []
    if info.primary_key:
        keys.append(("PRIMARY", info.primary_key))
    keys += [(u.name, u.columns) for u in info.unique_keys]
    key_bytes = b"".join(
        _len(5, _len(1, n.encode()) + b"".join(_len(2, c.encode()) for c in cs)) for n, cs in keys
    )
    return b"".join(out), key_bytes, plan


_MUTATION = {RowKind.INSERT: 0, RowKind.UPDATE: 1, RowKind.DELETE: 2}


def _runs(rows: tuple[RowChange, ...]) -> Iterator[tuple[TableInfo, list[RowChange]]]:
    run: list[RowChange] = []
    for r in rows:
        if run and r.table is not run[0].table and r.table != run[0].table:
            yield run[0].table, run
            run = []
        run.append(r)
    if run:
        yield run[0].table, run


def encode_txn(txn: Txn) -> bytes | None:
    """The secondary binlog of ``txn``; None for a checkpoint-only marker."""
    if txn.ddl is not None:
        d = txn.ddl
        ddl = _len(1, d.schema.encode()) + _len(2, d.table.encode()) + _len(3, d.query.encode())
        return _uint(1, 1) + _uint(2, txn.commit_ts) + _len(4, ddl)
    if not txn.rows:
        return None
    tables = []
    for info, changes in _runs(txn.rows):
        head, keys, plan = _table_header(info)
        muts = []
        try:
            for ch in changes:
                m = _uint(1, _MUTATION[ch.kind]) + _len(2, _row(ch.values, plan))
                if ch.old_values is not None:
                    m += _len(3, _row(ch.old_values, plan))
                muts.append(_len(4, m))
        except (SecondaryBinlogError, ValueError, KeyError) as e:
            raise SecondaryBinlogError(
                f"txn {txn.commit_ts}: {info.qualified}: cannot write a row: {e}"
            ) from e
        tables.append(_len(1, head + b"".join(muts) + keys))
    return _uint(1, 0) + _uint(2, txn.commit_ts) + _len(3, b"".join(tables))


# -- reading ----------------------------------------------------------------------------------


def _value(col: Column, name: str) -> SqlValue:
    if col.is_null:
        return None
    if name in _INTS:
        return col.int64_value or col.uint64_value
    if name in ("float", "double"):
        return col.double_value
    if name in ("enum", "set"):
        return col.uint64_value
    if name == "bit":
        return int.from_bytes(col.bytes_value, "big")
    if name == "year":
        return int(col.string_value) if col.string_value.isdigit() else col.string_value
    if name in _BLOBS:
        return col.bytes_value
    if name == "json":
        return col.bytes_value.decode("utf-8", "surrogateescape")
    return col.string_value


def _table_info(t: Table) -> TableInfo:
    pk: tuple[str, ...] = ()
    uks: dict[str, list[str]] = {}
    for k in t.unique_keys:
        if k.name == "PRIMARY":
            pk = tuple(k.column_names)
        else:
            uks[k.name] = list(k.column_names)
    cols = [(c.name, c.mysql_type) for c in t.column_info]
    return TableInfo.build(t.schema_name, t.table_name, cols, pk, uks)


def parse(payload: bytes) -> Binlog:
    try:
        return Binlog().parse(payload)
    except Exception as e:  # betterproto raises assorted errors on bad input
        raise SecondaryBinlogError(f"not a secondary binlog ({len(payload)} bytes): {e}") from e


def decode_txn(payload: bytes) -> Txn:
    """A secondary binlog message back as a ``Txn`` (values as the sinks take them)."""
    b = parse(payload)
    if b.type == BinlogType.DDL:
        d = b.ddl_data
        query = d.ddl_query.decode("utf-8", "surrogateescape")
        return Txn(b.commit_ts, ddl=Ddl(d.schema_name, query, d.table_name))
    rows: list[RowChange] = []
    for t in b.dml_data.tables:
        info = _table_info(t)
        names = [(c.name, c.mysql_type) for c in t.column_info]
        for m in t.mutations:
            values = {n: _value(c, tp) for (n, tp), c in zip(names, m.row.columns, strict=True)}
            if m.type == MutationType.Update:
                old = {
                    n: _value(c, tp) for (n, tp), c in zip(names, m.change_row.columns, strict=True)
                }
                rows.append(RowChange.update(info, old, values))
            elif m.type == MutationType.Delete:
                rows.append(RowChange.delete(info, values))
            else:
                rows.append(RowChange.insert(info, values))
    return Txn(b.commit_ts, rows=tuple(rows))


def commit_ts_of(payload: bytes) -> int:
    return parse(payload).commit_ts
