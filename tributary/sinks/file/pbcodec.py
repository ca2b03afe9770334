"""Transactions <-> tidb-binlog's ``pb_binlog.Binlog``: the file sink's records, reparo's input.

``Txn`` -> ``Binlog`` as tidb-binlog's ``TiBinlogToPbBinlog`` does: a DDL is ``tp = DDL`` with
``ddl_query = "use `db`; <query>;"`` (``"<query>;"`` for CREATE DATABASE or without a
database); rows are ``tp = DML`` with one ``Event`` per row change (schema, table, Insert/Update/
Delete) whose ``row`` holds one marshalled ``column`` per column of the row: name, ``tp`` = the
TiDB field type byte, ``mysql_type``, ``value`` = ``codec.EncodeValue`` of the datum, and for an
update ``value`` = the OLD value, ``changed_value`` = the NEW one. Datums as tidb-binlog's
``formatData`` leaves them: integers Int (Uint when unsigned or past int64), YEAR Int, BIT Uint,
FLOAT/DOUBLE Float, ENUM the Uint index, SET the Uint bitmask, and the text of everything else
(decimal, temporal, JSON, strings) as Bytes. A checkpoint-only Txn has no record (None).

``Binlog`` -> ``Txn`` is the reverse: values come back as the sinks take them (change/model.py),
each row with a ``TableInfo`` built from its columns and no keys (pb_binlog carries none, so
downstream rows are identified by all their columns). Example: column ``e enum('a','b')`` with
value ``'b'`` is written ``tp = b'\\xf7'``, ``value = 09 02`` (uvarint 2) and read back as ``'b'``.

Where we differ: ``mysql_type`` is the full column type (``bigint unsigned``, ``enum('a','b')``)
where tidb-binlog writes the bare name (``bigint``, ``enum``); readers decode by ``tp``, and the
full type lets ENUM/SET indexes map back to names (a bare ``enum`` reads back as the index). A
column missing from one side of an update is written with an empty value and left out again.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from tributary.change import Ddl, RowChange, RowKind, SqlValue, TableInfo, Txn
from tributary.sinks.lexer import Cursor, tokenize
from tributary.sinks.port import SinkError
from tributary.tidbcodec import (
    NULL,
    BytesDatum,
    CodecError,
    Datum,
    DecimalDatum,
    FloatDatum,
    IntDatum,
    JsonDatum,
    NullDatum,
    UintDatum,
    decode_one,
    encode_value,
)
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.enumset import enum_index, enum_name, set_mask, set_names, set_to_str
from tributary.tidbcodec.json_binary import decode as json_decode
from tributary.tidbcodec.json_text import to_text
from tributary.wire.pb_binlog import Binlog, BinlogType, Column, DmlData, Event, EventType

_INT64_MAX = (1 << 63) - 1
_DML, _DDL = BinlogType(BinlogType.DML), BinlogType(BinlogType.DDL)
_EVENT = {
    RowKind.INSERT: EventType(EventType.Insert),
    RowKind.UPDATE: EventType(EventType.Update),
    RowKind.DELETE: EventType(EventType.Delete),
}
_KIND = {v: k for k, v in _EVENT.items()}


class PbCodecError(SinkError):
    """A transaction that cannot be written as a pb_binlog record, or a record that is not one."""


# -- column types ---------------------------------------------------------------------------

_TYPES: dict[str, int] = {}
for _tp, _names in (
    (mt.TYPE_TINY, "tinyint int1 bool boolean"),
    (mt.TYPE_SHORT, "smallint int2"),
    (mt.TYPE_INT24, "mediumint int3 middleint"),
    (mt.TYPE_LONG, "int integer int4"),
    (mt.TYPE_LONGLONG, "bigint int8 serial"),
    (mt.TYPE_FLOAT, "float float4"),
    (mt.TYPE_DOUBLE, "double real float8"),
    (mt.TYPE_NEWDECIMAL, "decimal numeric dec fixed"),
    (mt.TYPE_DATE, "date"),
    (mt.TYPE_DATETIME, "datetime"),
    (mt.TYPE_TIMESTAMP, "timestamp"),
    (mt.TYPE_DURATION, "time"),
    (mt.TYPE_YEAR, "year"),
    (mt.TYPE_BIT, "bit"),
    (mt.TYPE_JSON, "json"),
    (mt.TYPE_ENUM, "enum"),
    (mt.TYPE_SET, "set"),
    (mt.TYPE_STRING, "char character nchar binary"),
    (mt.TYPE_VARCHAR, "varchar nvarchar varcharacter varbinary"),
    (mt.TYPE_TINY_BLOB, "tinytext tinyblob"),
    (mt.TYPE_BLOB, "text blob"),
    (mt.TYPE_MEDIUM_BLOB, "mediumtext mediumblob long"),
    (mt.TYPE_LONG_BLOB, "longtext longblob"),
    (mt.TYPE_GEOMETRY, "geometry point linestring polygon multipoint geometrycollection"),
):
    _TYPES.update(dict.fromkeys(_names.split(), _tp))
_BINARY_NAMES = frozenset("binary varbinary tinyblob blob mediumblob longblob".split())


@dataclass(frozen=True, slots=True)
class ColType:
    """What encoding and decoding need to know of a column's MySQL type."""

    tp: int | None  # TiDB field type byte; None for a type name we do not know
    unsigned: bool = False
    binary: bool = False  # a binary string: values are bytes
    elems: tuple[str, ...] = ()  # ENUM/SET members


@lru_cache(maxsize=4096)
def column_type(mysql_type: str) -> ColType:
    """``"bigint unsigned"`` -> (LONGLONG, unsigned); ``"enum('a','b')"`` -> (ENUM, a, b)."""
    tokens = tokenize(mysql_type)
    if not tokens or tokens[0].kind != "word":
        return ColType(None)
    base = tokens[0].text.lower()
    words = [t.text.lower() for t in tokens[1:] if t.kind == "word"]
    tp = _TYPES.get(base)
    if base in ("char", "character") and words[:1] == ["varying"]:
        tp = mt.TYPE_VARCHAR
    elems: tuple[str, ...] = ()
    if tp in (mt.TYPE_ENUM, mt.TYPE_SET) and len(tokens) > 1 and tokens[1].text == "(":
        elems = tuple(t.text for t in tokens[2:] if t.kind == "string")
    charset_binary = any(
        w in ("set", "charset") and nxt == "binary" for w, nxt in itertools.pairwise(words)
    )
    binary = base in _BINARY_NAMES or charset_binary
    return ColType(tp, "unsigned" in words or base == "serial", binary, elems)


# -- values -----------------------------------------------------------------------------------


def _datum(value: SqlValue, ct: ColType) -> Datum:
    if value is None:
        return NULL
    tp = ct.tp
    if isinstance(value, str) and ct.elems:
        if tp == mt.TYPE_ENUM:
            return UintDatum(enum_index(ct.elems, value))
        if tp == mt.TYPE_SET:
            return UintDatum(set_mask(ct.elems, value))
    if isinstance(value, bytes) and tp == mt.TYPE_BIT:
        return UintDatum(int.from_bytes(value, "big"))
    if isinstance(value, int):
        if ct.unsigned or tp == mt.TYPE_BIT or value > _INT64_MAX:
            return UintDatum(value)
        return IntDatum(value)
    if isinstance(value, float):
        return FloatDatum(value)
    if isinstance(value, Decimal):
        return BytesDatum(format(value, "f").encode())
    if isinstance(value, str):
        return BytesDatum(value.encode("utf-8", "surrogateescape"))
    if isinstance(value, bytes):
        return BytesDatum(value)
    raise PbCodecError(f"cannot write {type(value).__name__} {value!r}")


def _value(raw: bytes, ct: ColType) -> SqlValue:
    datum, end = decode_one(raw)
    if end != len(raw):
        raise CodecError(f"{len(raw) - end} bytes after the value")
    if isinstance(datum, NullDatum):
        return None
    if isinstance(datum, IntDatum | UintDatum):
        if ct.elems and ct.tp == mt.TYPE_ENUM:
            return enum_name(ct.elems, datum.value)
        if ct.elems and ct.tp == mt.TYPE_SET:
            return set_to_str(ct.elems, set_names(ct.elems, datum.value))
        return datum.value
    if isinstance(datum, FloatDatum):
        return datum.value
    if isinstance(datum, BytesDatum):
        if ct.tp == mt.TYPE_BIT:
            return int.from_bytes(datum.value, "big")
        return datum.value if ct.binary else datum.value.decode("utf-8", "surrogateescape")
    if isinstance(datum, DecimalDatum):
        return format(datum.value, "f")
    if isinstance(datum, JsonDatum):
        return to_text(json_decode(datum.type_code, datum.data))
    raise CodecError(f"unexpected datum {datum!r}")


# -- DDL --------------------------------------------------------------------------------------

_USE = re.compile(r"\s*use\s+(`(?:[^`]|``)+`|[^\s;`]+)\s*;", re.IGNORECASE)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _is_create_database(query: str) -> bool:
    words = [t.text.upper() for t in tokenize(query)[:2]]
    return words in (["CREATE", "DATABASE"], ["CREATE", "SCHEMA"])


def ddl_query(ddl: Ddl) -> str:
    """The ``ddl_query`` tidb-binlog's drainer writes for ``ddl``."""
    query = ddl.query.strip()
    while query.endswith(";"):
        query = query[:-1].rstrip()
    if not ddl.schema or _is_create_database(query):
        return query + ";"
    return f"use {_quote(ddl.schema)}; {query};"


_NOT_A_NAME = frozenset({"CHARACTER", "CHARSET", "DEFAULT", "COLLATE", "ENCRYPTION"})


def _target(cur: Cursor, schema: str) -> tuple[str, str]:
    """The database and table a DDL statement changes (table "" for a database DDL)."""
    for verb in ("CREATE", "DROP", "ALTER"):
        for kind in ("DATABASE", "SCHEMA"):
            if cur.accept(verb, kind):
                if not cur.accept("IF", "NOT", "EXISTS"):
                    cur.accept("IF", "EXISTS")
                tok = cur.peek()
                named = tok is not None and tok.kind in ("word", "qident")
                if named and tok is not None and not tok.is_word(*_NOT_A_NAME):
                    return tok.text, ""
                return schema, ""
    cur.accept("CREATE", "OR", "REPLACE")
    while any(cur.accept(w) for w in ("CREATE", "DROP", "ALTER", "TEMPORARY", "ONLINE", "IGNORE")):
        pass
    if cur.accept("RENAME", "TABLE") or cur.accept("TRUNCATE"):
        cur.accept("TABLE")
        return cur.qualified(schema)
    if cur.accept("TABLE"):
        if not cur.accept("IF", "NOT", "EXISTS"):
            cur.accept("IF", "EXISTS")
        return cur.qualified(schema)
    if any(cur.accept(w) for w in ("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX", "KEY")):
        while not cur.accept("ON"):
            cur.next()
        return cur.qualified(schema)
    return schema, ""


def parse_ddl_query(text: str) -> Ddl:
    """A ``ddl_query`` back as a ``Ddl``: the database of its table (else of the ``use``), the
    statement without ``use`` and final ``;``, and the table it changes."""
    m = _USE.match(text)
    schema = ""
    if m is not None:
        name = m.group(1)
        schema = name[1:-1].replace("``", "`") if name.startswith("`") else name
        text = text[m.end() :]
    query = text.strip()
    while query.endswith(";"):
        query = query[:-1].rstrip()
    try:
        db, table = _target(Cursor(query), schema)
    except (ValueError, IndexError):
        db, table = schema, ""
    return Ddl(db, query, table)


# -- transactions -----------------------------------------------------------------------------


def _columns(change: RowChange) -> Iterable[bytes]:
    new, old = change.values, change.old_values
    for info in change.table.columns:
        name = info.name
        if name not in new and (old is None or name not in old):
            continue
        ct = column_type(info.mysql_type)
        if ct.tp is None:
            raise PbCodecError(f"{change.table.qualified}.{name}: unknown type {info.mysql_type!r}")
        col = Column(name=name, tp=bytes((ct.tp,)), mysql_type=info.mysql_type)
        if old is None:
            col.value = encode_value(_datum(new[name], ct))
        else:
            col.value = encode_value(_datum(old[name], ct)) if name in old else b""
            col.changed_value = encode_value(_datum(new[name], ct)) if name in new else b""
        yield bytes(col)


def to_pb(txn: Txn) -> Binlog | None:
    """The record of ``txn``; None for a checkpoint-only transaction."""
    if txn.ddl is not None:
        return Binlog(_DDL, txn.commit_ts, ddl_query=ddl_query(txn.ddl).encode())
    if not txn.rows:
        return None
    try:
        events = [
            Event(c.table.schema, c.table.table, _EVENT[c.kind], list(_columns(c)))
            for c in txn.rows
        ]
    except (CodecError, KeyError) as e:
        raise PbCodecError(f"transaction at commit ts {txn.commit_ts}: {e}") from e
    return Binlog(_DML, txn.commit_ts, DmlData(events))


def encode_txn(txn: Txn) -> bytes | None:
    binlog = to_pb(txn)
    return None if binlog is None else bytes(binlog)


@lru_cache(maxsize=1024)
def _table(schema: str, table: str, columns: tuple[tuple[str, str], ...]) -> TableInfo:
    return TableInfo.build(schema, table, columns)


def _row_change(event: Event) -> RowChange:
    cols = [Column().parse(raw) for raw in event.row]
    table = _table(event.schema_name, event.table_name, tuple((c.name, c.mysql_type) for c in cols))
    kind = _KIND[event.tp]
    new: dict[str, SqlValue] = {}
    old: dict[str, SqlValue] = {}
    for c in cols:
        ct = column_type(c.mysql_type)
        if c.tp:
            ct = ColType(c.tp[0], ct.unsigned, ct.binary, ct.elems)
        if kind is RowKind.UPDATE:
            _put(old, c.name, c.value, ct)
            _put(new, c.name, c.changed_value, ct)
        else:
            new[c.name] = _value(c.value, ct)
    return RowChange(kind, table, new, old if kind is RowKind.UPDATE else None)


def _put(row: dict[str, SqlValue], name: str, raw: bytes, ct: ColType) -> None:
    if raw:
        row[name] = _value(raw, ct)


def from_pb(binlog: Binlog) -> Txn:
    """The transaction a record holds (a DML record without events: checkpoint-only)."""
    ts = binlog.commit_ts
    try:
        if binlog.tp == _DDL:
            return Txn(ts, ddl=parse_ddl_query(binlog.ddl_query.decode("utf-8", "replace")))
        rows = tuple(_row_change(e) for e in binlog.dml_data.events)
        return Txn(ts, rows=rows)
    except (CodecError, ValueError, KeyError) as e:
        raise PbCodecError(f"record at commit ts {ts}: {e}") from e


def parse_record(payload: bytes) -> Binlog:
    """A record's payload as a ``pb_binlog.Binlog``."""
    try:
        return Binlog().parse(payload)
    except (ValueError, RuntimeError) as e:
        raise PbCodecError(f"not a pb_binlog record: {e}") from e


def decode_txn(payload: bytes) -> Txn:
    return from_pb(parse_record(payload))


def commit_ts_of(payload: bytes) -> int:
    """A record's commit ts."""
    return int(parse_record(payload).commit_ts)
