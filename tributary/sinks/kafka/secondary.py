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

bytes -> ``Txn`` (``decode_txn``, the arbiter's reader) is hand-written too, in
``secondary_read`` (re-exported here): values come back as the sinks take them, each table with
a ``TableInfo`` from the message's column infos and keys. ENUM/SET come back as their number (the
message has no member list). ``commit_ts_of`` (the drainer's sink, for the last message of its
topic at start) reads with the same reader.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from tributary.change import RowChange, RowKind, SqlValue, TableInfo, Txn
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka import rowcode
from tributary.sinks.kafka.secondary_read import SecondaryBinlogError as SecondaryBinlogError
from tributary.sinks.kafka.secondary_read import decode_txn as decode_txn
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.enumset import enum_index, set_mask
from tributary.varint import varint

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
#
# One pass per message. Everything that depends only on the table (its ``Table`` header, its
# keys, which column encoder each column takes) is built once per ``TableInfo`` (``_plan``).
# Each column encoder returns one whole entry of ``Row.columns``: tag 0a, the length, then the
# ``Column``; the common short ones come from tables built at import. Example: int64 5 is
# ``0a 02 10 05``; the string "ab" is ``0a 04 32 02 61 62``; NULL is ``0a 02 08 01``. Nested
# lengths are summed as the parts are made, and the message is joined once at the end.
#
# tests/support/secondary_reference.py keeps the plain field-by-field encoder this one must
# match byte for byte (a unit test compares them over every column type).


def _tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _len(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + varint(len(payload)) + payload


def _uint(field: int, value: int) -> bytes:
    return _tag(field, 0) + varint(value)


_BYTE = [bytes((i,)) for i in range(256)]
_SMALL = 1 << 12
_VARINTS = [varint(i) for i in range(_SMALL)]  # row, mutation and table lengths mostly


def _uvarint(value: int) -> bytes:
    """``varint`` with the cases up to five bytes (2**35) unrolled."""
    if 0 <= value < _SMALL:
        return _VARINTS[value]
    if 0 < value < 0x200000:
        if value < 0x4000:
            return bytes((value & 0x7F | 0x80, value >> 7))
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    if 0 < value < 0x800000000:
        low = (value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14 & 0x7F | 0x80)
        if value < 0x10000000:
            return bytes((*low, value >> 21))
        return bytes((*low, value >> 21 & 0x7F | 0x80, value >> 28))
    return varint(value)


ColumnEncoder = Callable[[SqlValue], bytes]

_NULL = b"\x0a\x02\x08\x01"  # Row.columns entry {is_null: true}
_SHORT = 126  # payloads below this many bytes have a one-byte length, inside and out


def _wrap(column: bytes) -> bytes:
    """A ``Column`` as an entry of ``Row.columns``."""
    return b"\x0a" + _uvarint(len(column)) + column


def _int_encoder(field: int) -> ColumnEncoder:
    tag = _BYTE[field << 3]
    small = [b"\x0a\x02" + tag + _BYTE[i] for i in range(0x80)]
    heads = [b""] + [b"\x0a" + _BYTE[n + 1] + tag for n in range(1, 11)]

    def encode(value: SqlValue) -> bytes:
        if value is None:
            return _NULL
        if value.__class__ is int:
            if 0 <= value < 0x80:
                return small[value]
        elif not isinstance(value, int):
            raise SecondaryBinlogError(f"integer column holds {type(value).__name__} {value!r}")
        raw = _uvarint(value)
        return heads[len(raw)] + raw

    return encode


def _payload_heads(field: int) -> Callable[[int], bytes]:
    """Field ``field`` (length-delimited) of a ``Column`` of an ``n``-byte payload, as an entry of
    ``Row.columns`` up to the payload: ``head(n) + payload`` is the entry."""
    tag = _BYTE[field << 3 | 2]
    short = [b"\x0a" + _BYTE[n + 2] + tag + _BYTE[n] for n in range(_SHORT)]

    def head(n: int) -> bytes:
        if n < _SHORT:
            return short[n]
        inner = tag + _uvarint(n)
        return b"\x0a" + _uvarint(len(inner) + n) + inner

    return head


def _text_encoder(field: int) -> ColumnEncoder:
    """Strings (field 6) and bytes (field 5): bytes as they are, anything else as its text."""
    head = _payload_heads(field)

    def encode(value: SqlValue) -> bytes:
        if value is None:
            return _NULL
        if value.__class__ is str:
            try:
                raw = value.encode()
            except UnicodeEncodeError:
                raw = value.encode("utf-8", "surrogateescape")
        elif isinstance(value, bytes):
            raw = value
        else:
            raw = _text(value).encode("utf-8", "surrogateescape")
        return head(len(raw)) + raw

    return encode


def _double_encoder(name: str) -> ColumnEncoder:
    pack = _DOUBLE.pack

    def encode(value: SqlValue) -> bytes:
        if value is None:
            return _NULL
        if not isinstance(value, int | float | Decimal | str):
            raise SecondaryBinlogError(f"{name} column holds {type(value).__name__}")
        return b"\x0a\x09\x21" + pack(float(value))

    return encode


def _enum_set_encoder(name: str, elems: tuple[str, ...]) -> ColumnEncoder:
    number = _int_encoder(3)

    def encode(value: SqlValue) -> bytes:
        if value is None or isinstance(value, int):
            return number(value)
        text = value.decode() if isinstance(value, bytes) else str(value)
        return number(enum_index(elems, text) if name == "enum" else set_mask(elems, text))

    return encode


def _bit_encoder(flen: int) -> ColumnEncoder:
    head = _payload_heads(5)

    def encode(value: SqlValue) -> bytes:
        if value is None:
            return _NULL
        if isinstance(value, int):
            size = max((flen + 7) // 8 if flen > 0 else 1, (value.bit_length() + 7) // 8)
            value = value.to_bytes(size, "big")
        raw = value if isinstance(value, bytes) else str(value).encode()
        return head(len(raw)) + raw

    return encode


_INT64 = _int_encoder(2)
_UINT64 = _int_encoder(3)
_STRING = _text_encoder(6)
_BYTES = _text_encoder(5)
_FAST = {id(_INT64): rowcode.INT64, id(_UINT64): rowcode.UINT64}
_FAST |= {id(_STRING): rowcode.STRING, id(_BYTES): rowcode.BYTES}


def _column_encoder(name: str, ct: ColType, flen: int) -> ColumnEncoder:
    """The encoder of a column whose TiDB type name is ``name`` (``DatumToColumn``'s rules)."""
    if name in _INTS:
        return _UINT64 if ct.unsigned else _INT64
    if name in ("float", "double"):
        return _double_encoder(name)
    if name == "enum" or name == "set":
        return _enum_set_encoder(name, ct.elems)
    if name == "bit":
        return _bit_encoder(flen)
    if name in _BLOBS or name == "json":
        return _BYTES
    return _STRING  # strings, temporal, decimal and anything else: the text


def _text(value: SqlValue) -> str:
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one table's ``Table`` messages share: fields 1-3 (names and column infos), field 5
    (the unique keys) and the encoder of its rows (``rowcode``: one generated function per table
    over the column encoders, in column order)."""

    info: TableInfo  # kept so the cache's id() key cannot be reused while the entry lives
    head: bytes
    keys: bytes
    row: rowcode.RowEncoder


_PLANS: dict[int, _Plan] = {}
_PLANS_MAX = 1024


def _plan(info: TableInfo) -> _Plan:
    plan = _PLANS.get(id(info))
    if plan is not None and plan.info is info:
        return plan
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    plan = _PLANS[id(info)] = _build_plan(info)
    return plan


def _build_plan(info: TableInfo) -> _Plan:
    out = [_len(1, info.schema.encode()), _len(2, info.table.encode())]
    columns = []
    for c in info.columns:
        ct = column_type(c.mysql_type)
        name = type_name(ct)
        flen, dec = _flen_decimal(c.mysql_type)
        columns.append((c.name, _column_encoder(name, ct, flen)))
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
    names = [c for c, _ in columns]
    kinds = [_FAST.get(id(encode)) for _, encode in columns]
    row = rowcode.row_encoder(names, kinds, [encode for _, encode in columns])
    return _Plan(info, b"".join(out), key_bytes, row)


# TableMutation: field 1 (type), then the tag of field 2 (row)
_INSERT, _UPDATE, _DELETE = b"\x08\x00\x12", b"\x08\x01\x12", b"\x08\x02\x12"
_KINDS = RowKind.INSERT, RowKind.DELETE


def _runs(rows: tuple[RowChange, ...]) -> Iterator[tuple[TableInfo, list[RowChange]]]:
    run: list[RowChange] = []
    for r in rows:
        if run and r.table is not run[0].table and r.table != run[0].table:
            yield run[0].table, run
            run = []
        run.append(r)
    if run:
        yield run[0].table, run


def _mutations(changes: list[RowChange], plan: _Plan, parts: list[bytes]) -> int:
    """Append the ``Table.mutations`` entries of ``changes`` to ``parts``; their size."""
    encode = plan.row
    varints = _VARINTS
    insert, delete = _KINDS
    size = 0
    for ch in changes:
        row = encode(ch.values)
        n = len(row)
        row_len = varints[n] if n < _SMALL else _uvarint(n)
        m_len = 3 + len(row_len) + n
        kind = ch.kind  # by identity: an Enum's hash and its class attributes are slow
        head = _INSERT if kind is insert else _DELETE if kind is delete else _UPDATE
        if ch.old_values is None:
            m_size = varints[m_len] if m_len < _SMALL else _uvarint(m_len)
            parts += (b"\x22", m_size, head, row_len, row)
        else:
            old = encode(ch.old_values)
            n = len(old)
            old_len = varints[n] if n < _SMALL else _uvarint(n)
            m_len += 1 + len(old_len) + n
            m_size = varints[m_len] if m_len < _SMALL else _uvarint(m_len)
            parts += (b"\x22", m_size, head, row_len, row, b"\x1a", old_len, old)
        size += 1 + len(m_size) + m_len
    return size


def encode_txn(txn: Txn) -> bytes | None:
    """The secondary binlog of ``txn``; None for a checkpoint-only marker."""
    if txn.ddl is not None:
        d = txn.ddl
        ddl = _len(1, d.schema.encode()) + _len(2, d.table.encode()) + _len(3, d.query.encode())
        return _uint(1, 1) + _uint(2, txn.commit_ts) + _len(4, ddl)
    if not txn.rows:
        return None
    parts: list[bytes] = []  # of dml_data: one Table per run of one table's rows
    size = 0
    for info, changes in _runs(txn.rows):
        plan = _plan(info)
        table: list[bytes] = [plan.head]
        try:
            t_len = len(plan.head) + _mutations(changes, plan, table) + len(plan.keys)
        except (SecondaryBinlogError, ValueError, KeyError) as e:
            raise SecondaryBinlogError(
                f"txn {txn.commit_ts}: {info.qualified}: cannot write a row: {e}"
            ) from e
        table.append(plan.keys)
        t_size = _uvarint(t_len)
        parts += (b"\x0a", t_size, *table)
        size += 1 + len(t_size) + t_len
    return b"".join([b"\x08\x00\x10", _uvarint(txn.commit_ts), b"\x1a", _uvarint(size), *parts])


# -- reading ----------------------------------------------------------------------------------


def commit_ts_of(payload: bytes) -> int:
    """The commit ts of a secondary binlog message (read whole by ``decode_txn``)."""
    return decode_txn(payload).commit_ts
