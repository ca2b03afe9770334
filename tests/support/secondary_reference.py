"""The secondary-binlog encoder and decoder as first written. The encoder goes field by field,
each nested message built and then wrapped with its tag and length; the decoder reads with the
generated betterproto classes. Slow and plain: ``tributary.sinks.kafka.secondary`` must write
exactly the same bytes (``tests/unit/test_sinks_kafka_secondary.py`` compares them), and
``secondary_read.decode_txn`` must give the same transactions and refuse what ``Binlog().parse``
refuses (``tests/unit/test_secondary_read.py``, ``bench.fuzz``'s ``secondary_read`` target).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from decimal import Decimal

from tributary.change import Ddl, Row, RowChange, RowKind, SqlValue, TableInfo, Txn
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka.secondary import SecondaryBinlogError, type_name
from tributary.tidbcodec.enumset import enum_index, set_mask
from tributary.varint import varint
from tributary.wire.slave.binlog import Binlog, BinlogType, Column, MutationType, Table

_INTS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
_BLOBS = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_LENGTH = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_DOUBLE = struct.Struct("<d")
_MUTATION = {RowKind.INSERT: 0, RowKind.UPDATE: 1, RowKind.DELETE: 2}


def _flen_decimal(mysql_type: str) -> tuple[int, int]:
    m = _LENGTH.search(mysql_type) if not mysql_type.lower().startswith(("enum", "set")) else None
    if m is None:
        return -1, -1
    return int(m.group(1)), int(m.group(2) or 0)


def _tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _len(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + varint(len(payload)) + payload


def _uint(field: int, value: int) -> bytes:
    return _tag(field, 0) + varint(value)


def _text(value: SqlValue) -> str:
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def _column(value: SqlValue, name: str, ct: ColType, flen: int) -> bytes:
    if value is None:
        return b"\x08\x01"
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
    raw = value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")
    return _len(6, raw)


def _row(values: Row, cols: list[tuple[str, str, ColType, int]]) -> bytes:
    get = values.get
    return b"".join(_len(1, _column(get(c), name, ct, flen)) for c, name, ct, flen in cols)


def _table_header(info: TableInfo) -> tuple[bytes, bytes, list[tuple[str, str, ColType, int]]]:
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
        for ch in changes:
            m = _uint(1, _MUTATION[ch.kind]) + _len(2, _row(ch.values, plan))
            if ch.old_values is not None:
                m += _len(3, _row(ch.old_values, plan))
            muts.append(_len(4, m))
        tables.append(_len(1, head + b"".join(muts) + keys))
    return _uint(1, 0) + _uint(2, txn.commit_ts) + _len(3, b"".join(tables))


# -- the decoder -------------------------------------------------------------------------------


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


def decode_txn(payload: bytes) -> Txn:
    """A secondary binlog message back as a ``Txn``, read with the generated classes; any
    exception for a message that is not one (the codec's, a ValueError of the values)."""
    b = Binlog().parse(payload)
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


def canonical(txn: Txn) -> tuple[object, ...]:
    """What two decoders must agree on, floats by ``repr`` (NaN equals NaN, -0.0 is not 0.0)."""

    def row(values: Row | None) -> object:
        return None if values is None else repr(list(values.items()))

    return (
        txn.commit_ts,
        txn.ddl,
        [(r.kind, r.table, row(r.values), row(r.old_values)) for r in txn.rows],
    )


# -- samples --------------------------------------------------------------------------------------

WIDE = TableInfo.build(
    "db",
    "wide",
    [
        ("id", "bigint"),
        ("ti", "tinyint"),
        ("si", "smallint unsigned"),
        ("mi", "mediumint"),
        ("i", "int"),
        ("u", "bigint unsigned"),
        ("fl", "float"),
        ("db", "double"),
        ("dc", "decimal(20,6)"),
        ("dt", "date"),
        ("dtm", "datetime(6)"),
        ("ts", "timestamp"),
        ("tm", "time"),
        ("yr", "year"),
        ("b1", "bit(1)"),
        ("b64", "bit(64)"),
        ("ch", "char(10)"),
        ("vc", "varchar(300)"),
        ("tt", "tinytext"),
        ("tx", "text"),
        ("mt", "mediumtext"),
        ("lt", "longtext"),
        ("bn", "binary(4)"),
        ("vb", "varbinary(300)"),
        ("tb", "tinyblob"),
        ("bl", "blob"),
        ("mb", "mediumblob"),
        ("lb", "longblob"),
        ("js", "json"),
        ("en", "enum('a','b','c')"),
        ("st", "set('x','y','z')"),
        ("vcb", "varchar(8) binary"),
    ],
    ["id"],
    {"uk_vc": ["vc", "ch"], "uk_i": ["i"]},
)
SMALL = TableInfo.build("db2", "small", [("k", "int"), ("v", "varchar(10)")], ["k"])
NOKEY = TableInfo.build("db2", "nokey", [("a", "int"), ("b", "text")])
UKONLY = TableInfo.build("db2", "ukonly", [("a", "int"), ("b", "int")], (), {"uk": ["a"]})


def wide_row(i: int) -> dict[str, SqlValue]:
    """A row of ``WIDE`` with edge values picked by ``i`` (NULLs in every other column when
    ``i`` is a multiple of 5)."""
    big = "é" * (40 + i % 90)
    row: dict[str, SqlValue] = {
        "id": [0, 1, -1, (1 << 63) - 1, -(1 << 63), 127, 128, 300][i % 8],
        "ti": [-128, 127, 0][i % 3],
        "si": [0, 65535, 5][i % 3],
        "mi": -8388608 + i,
        "i": i * 7919 - 5000,
        "u": [0, (1 << 64) - 1, 1 << 63, 42][i % 4],
        "fl": [0.0, -0.0, 1.5, float("inf"), float("nan")][i % 5],
        "db": [3.141592653589793, -1e308, 5e-324, float("-inf")][i % 4],
        "dc": ["0.000000", "-12345678901234.123456", Decimal("1.50")][i % 3],
        "dt": "2024-02-29",
        "dtm": "2024-01-02 03:04:05.123456",
        "ts": "1970-01-01 00:00:01",
        "tm": ["-838:59:59", "00:00:00"][i % 2],
        "yr": [2024, 0, 1901, 2155][i % 4],
        "b1": i % 2,
        "b64": [(1 << 64) - 1, 0, 1 << 40][i % 3],
        "ch": "",
        "vc": big,
        "tt": "\x00\n'\"\\",
        "tx": "漢字" * i,
        "mt": "x" * 200,
        "lt": "🎉",
        "bn": b"\x00\x01\x02\x03",
        "vb": bytes(range(256))[: i * 3 % 256],
        "tb": b"",
        "bl": b"\xff" * 130,
        "mb": b"m",
        "lb": b"\x80" * (i % 4),
        "js": ['{"a": [1, 2.5, "x"]}', "null", '"é"'][i % 3],
        "en": ["a", "c", 2][i % 3],
        "st": ["x,z", "", 7][i % 3],
        "vcb": b"\x00bin",
    }
    if i % 5 == 0:
        for n, c in enumerate(WIDE.column_names):
            if n % 2 and c not in ("i", "ch"):
                row[c] = None
    return row


def sample_txns() -> list[Txn]:
    """Transactions covering what the encoder writes: every column type, inserts, updates
    (old and new rows), deletes, NULLs, several tables (runs of one table, then another, then
    the first again), tables without a primary key, DDLs."""
    txns = [
        Txn(10, ddl=Ddl("", "CREATE DATABASE db")),
        Txn(11, ddl=Ddl("db", "CREATE TABLE wide (id bigint primary key)", "wide")),
        Txn(12, ddl=Ddl("db", "ALTER TABLE t ADD COLUMN c VARCHAR(10) DEFAULT 'é'", "t")),
    ]
    for i in range(12):
        rows = [
            RowChange.insert(WIDE, wide_row(i)),
            RowChange.update(WIDE, wide_row(i), wide_row(i + 1)),
            RowChange.insert(SMALL, {"k": i, "v": None if i % 3 else "v"}),
            RowChange.delete(WIDE, wide_row(i + 2)),
            RowChange.update(SMALL, {"k": i, "v": "a"}, {"k": i + 1, "v": "b"}),
            RowChange.insert(NOKEY, {"a": None, "b": "x" * i}),
            RowChange.delete(UKONLY, {"a": i, "b": None}),
        ]
        txns.append(Txn(100 + i, 90 + i, rows=tuple(rows[: 1 + i % len(rows)] + rows[i % 3 :])))
    txns.append(Txn(1 << 62, rows=(RowChange.insert(SMALL, {"k": 1, "v": "z"}),)))
    return txns
