"""pbcodec: Txn <-> pb_binlog.Binlog, the bytes tidb-binlog writes, a round trip of every kind."""

from __future__ import annotations

import datetime as dt
import string
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.change import Ddl, RowChange, RowKind, SqlValue, TableInfo, Txn
from tributary.sinks.file.pbcodec import (
    PbCodecError,
    column_type,
    ddl_query,
    decode_txn,
    encode_txn,
    from_pb,
    parse_ddl_query,
    to_pb,
)
from tributary.tidbcodec import BytesDatum, UintDatum, encode_value
from tributary.wire.pb_binlog import Binlog, BinlogType, Column, DmlData, Event, EventType

INT64 = 1 << 63
ENUM = "enum('a','b','c d')"
SET = "set('x','y','z')"
TEXT = st.text(max_size=20)


def _set_values() -> st.SearchStrategy[str]:
    members = ["x", "y", "z"]
    return st.sets(st.sampled_from(members)).map(lambda s: ",".join(m for m in members if m in s))


def _seconds(fsp: int) -> st.SearchStrategy[str]:
    return st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31)).map(
        lambda d: (
            d.strftime("%Y-%m-%d %H:%M:%S") + (f".{d.microsecond:06d}"[: fsp + 1] if fsp else "")
        )
    )


KINDS: dict[str, st.SearchStrategy[SqlValue]] = {
    "tinyint": st.integers(-128, 127),
    "int": st.integers(-(1 << 31), (1 << 31) - 1),
    "bigint": st.integers(-INT64, INT64 - 1),
    "bigint unsigned": st.integers(0, (1 << 64) - 1),
    "year": st.integers(1901, 2155),
    "bit(8)": st.integers(0, 255),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "decimal(10,2)": st.decimals(
        min_value=-99999999, max_value=99999999, places=2, allow_nan=False, allow_infinity=False
    ).map(lambda d: format(d, "f")),
    "varchar(20)": TEXT,
    "text": TEXT,
    "char(4) character set binary": st.binary(max_size=4),
    "varbinary(16)": st.binary(max_size=16),
    "blob": st.binary(max_size=40),
    "date": st.dates().map(lambda d: d.isoformat()),
    "datetime(3)": _seconds(3),
    "timestamp": _seconds(0),
    "time": st.integers(-838, 838).map(lambda h: f"{h:03d}:59:59"),
    "json": st.sampled_from(['{"a": [1, "x"]}', "null", "[]", '"s"', "1.5"]),
    ENUM: st.sampled_from(["a", "b", "c d", ""]),
    SET: _set_values(),
}
NAMES = list(KINDS)


@st.composite
def tables(draw: st.DrawFn) -> TableInfo:
    types = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    names = [f"c{i}" for i in range(len(types))]
    schema = draw(st.text(string.ascii_letters, min_size=1, max_size=5))
    return TableInfo.build(schema, "t", list(zip(names, types, strict=True)), [names[0]])


@st.composite
def row_changes(draw: st.DrawFn, table: TableInfo) -> RowChange:
    def row() -> dict[str, SqlValue]:
        return {c.name: draw(st.none() | KINDS[c.mysql_type]) for c in table.columns}

    kind = draw(st.sampled_from(list(RowKind)))
    if kind is RowKind.UPDATE:
        return RowChange.update(table, row(), row())
    return RowChange(kind, table, row())


@st.composite
def txns(draw: st.DrawFn) -> Txn:
    all_tables = draw(st.lists(tables(), min_size=1, max_size=3))
    rows = [
        draw(row_changes(draw(st.sampled_from(all_tables)))) for _ in range(draw(st.integers(1, 6)))
    ]
    return Txn(draw(st.integers(1, INT64 - 1)), rows=tuple(rows))


def _shape(change: RowChange) -> tuple[object, ...]:
    t = change.table
    columns = [(c.name, c.mysql_type) for c in t.columns]
    return (change.kind, t.schema, t.table, columns, dict(change.values), change.old_values)


@settings(max_examples=150, deadline=None)
@given(txns())
def test_round_trip_of_every_value_kind(txn: Txn) -> None:
    payload = encode_txn(txn)
    assert payload is not None
    back = decode_txn(payload)
    assert back.commit_ts == txn.commit_ts and back.ddl is None
    assert [_shape(c) for c in back.rows] == [_shape(c) for c in txn.rows]
    for change in back.rows:  # pb_binlog carries no keys: rows are identified by all columns
        assert change.table.primary_key == () and change.table.unique_keys == ()


T = TableInfo.build(
    "shop", "t", [("id", "int"), ("e", "enum('a','b')"), ("d", "decimal(5,2)")], ["id"]
)


def _columns(binlog: Binlog) -> list[Column]:
    return [Column().parse(raw) for raw in binlog.dml_data.events[0].row]


def test_columns_are_what_tidb_binlog_writes() -> None:
    txn = Txn(7, rows=(RowChange.insert(T, {"id": -1, "e": "b", "d": "1.50"}),))
    binlog = to_pb(txn)
    assert binlog is not None
    assert binlog.tp == BinlogType.DML and binlog.commit_ts == 7
    event = binlog.dml_data.events[0]
    assert (event.schema_name, event.table_name, event.tp) == ("shop", "t", EventType.Insert)
    cols = _columns(binlog)
    assert [(c.name, c.tp, c.mysql_type) for c in cols] == [
        ("id", b"\x03", "int"),
        ("e", b"\xf7", "enum('a','b')"),
        ("d", b"\xf6", "decimal(5,2)"),
    ]
    assert cols[0].value == b"\x08\x01"  # varint -1 (zigzag)
    assert cols[1].value == b"\x09\x02"  # ENUM: uvarint index 2
    assert cols[2].value == b"\x02\x081.50"  # decimal as its text (compact bytes, len 4)


def test_datums_as_tidb_binlogs_format_data_leaves_them() -> None:
    types = [("b", "bit(8)"), ("y", "year"), ("s", SET), ("u", "int unsigned"), ("f", "double")]
    types += [("w", "datetime"), ("j", "json"), ("n", "text")]
    table = TableInfo.build("s", "t", types)
    row: dict[str, SqlValue] = {"b": 255, "y": 2024, "s": "x,z", "u": 7, "f": 0.5}
    row |= {"w": "2024-02-29 10:00:00", "j": '{"a": 1}', "n": None}
    binlog = to_pb(Txn(1, rows=(RowChange.insert(table, row),)))
    assert binlog is not None
    assert {c.name: c.value for c in _columns(binlog)} == {
        "b": b"\x09\xff\x01",  # BIT: uvarint
        "y": b"\x08\xd0\x1f",  # YEAR: varint 2024 (zigzag 4048)
        "s": b"\x09\x05",  # SET: uvarint bitmask
        "u": b"\x09\x07",  # unsigned: uvarint
        "f": b"\x05\xbf\xe0\x00\x00\x00\x00\x00\x00",  # float flag, comparable bits
        "w": b"\x02\x26" + b"2024-02-29 10:00:00",  # temporal: its text
        "j": b"\x02\x10" + b'{"a": 1}',  # JSON: its text
        "n": b"\x00",  # NULL
    }


def test_update_writes_old_as_value_and_new_as_changed_value() -> None:
    txn = Txn(8, rows=(RowChange.update(T, {"id": 1, "e": "a"}, {"id": 2, "e": "b"}),))
    binlog = to_pb(txn)
    assert binlog is not None and binlog.dml_data.events[0].tp == EventType.Update
    cols = _columns(binlog)
    assert [(c.value, c.changed_value) for c in cols] == [
        (b"\x08\x02", b"\x08\x04"),
        (b"\x09\x01", b"\x09\x02"),
    ]


def test_a_column_missing_from_one_side_of_an_update_stays_missing() -> None:
    txn = Txn(9, rows=(RowChange.update(T, {"id": 1}, {"id": 1, "e": "b"}),))
    back = decode_txn(encode_txn(txn) or b"")
    assert back.rows[0].old_values == {"id": 1}
    assert back.rows[0].values == {"id": 1, "e": "b"}


def test_checkpoint_only_has_no_record_and_an_empty_record_is_checkpoint_only() -> None:
    assert to_pb(Txn(5)) is None and encode_txn(Txn(5, 4)) is None
    empty = from_pb(Binlog(BinlogType(BinlogType.DML), 6, DmlData([])))
    assert empty == Txn(6)


def test_a_record_written_the_go_way_decodes() -> None:
    """tidb-binlog writes bare type names (``enum``, ``blob``): decoding goes by ``tp``."""

    def col(name: str, tp: int, mysql_type: str, value: bytes) -> bytes:
        return bytes(Column(name=name, tp=bytes((tp,)), mysql_type=mysql_type, value=value))

    row = [
        col("e", 0xF7, "enum", encode_value(UintDatum(2))),
        col("b", 0xFC, "blob", encode_value(BytesDatum(b"\x00\xff"))),
        col("t", 0xFC, "text", encode_value(BytesDatum("é".encode()))),
        col("v", 0x0F, "varbinary", encode_value(BytesDatum(b"v"))),
        col("u", 0x08, "bigint", encode_value(UintDatum((1 << 64) - 1))),
        col("n", 0x0F, "varchar", b"\x00"),
    ]
    event = Event("db", "tbl", EventType(EventType.Delete), row)
    txn = decode_txn(bytes(Binlog(BinlogType(BinlogType.DML), 11, DmlData([event]))))
    change = txn.rows[0]
    assert change.kind is RowKind.DELETE and change.table.qualified == "db.tbl"
    assert change.values == {
        "e": 2,
        "b": b"\x00\xff",
        "t": "é",
        "v": b"v",
        "u": (1 << 64) - 1,
        "n": None,
    }


@pytest.mark.parametrize(
    ("ddl", "query"),
    [
        (Ddl("shop", "CREATE TABLE t (id INT)", "t"), "use `shop`; CREATE TABLE t (id INT);"),
        (Ddl("shop", "CREATE DATABASE shop"), "CREATE DATABASE shop;"),
        (Ddl("a`b", "DROP TABLE x;", "x"), "use `a``b`; DROP TABLE x;"),
        (Ddl("", "CREATE TABLE db.t (id INT)", ""), "CREATE TABLE db.t (id INT);"),
    ],
)
def test_ddl_query_as_the_drainer_writes_it(ddl: Ddl, query: str) -> None:
    txn = Txn(12, ddl=ddl)
    binlog = to_pb(txn)
    assert binlog is not None and binlog.tp == BinlogType.DDL
    assert binlog.ddl_query == query.encode()
    assert binlog.dml_data is None or not binlog.dml_data.events


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("use `shop`; CREATE TABLE t (id INT);", Ddl("shop", "CREATE TABLE t (id INT)", "t")),
        (
            "use shop; create table if not exists `o``k` (a int)",
            Ddl("shop", "create table if not exists `o``k` (a int)", "o`k"),
        ),
        (
            "use `a`; ALTER TABLE b.t ADD COLUMN c INT;",
            Ddl("b", "ALTER TABLE b.t ADD COLUMN c INT", "t"),
        ),
        (
            "CREATE DATABASE IF NOT EXISTS `x y`;",
            Ddl("x y", "CREATE DATABASE IF NOT EXISTS `x y`", ""),
        ),
        ("use s; DROP DATABASE s;", Ddl("s", "DROP DATABASE s", "")),
        ("use s; DROP TABLE IF EXISTS t1, t2;", Ddl("s", "DROP TABLE IF EXISTS t1, t2", "t1")),
        ("use s; TRUNCATE TABLE t;", Ddl("s", "TRUNCATE TABLE t", "t")),
        ("use s; RENAME TABLE t TO u;", Ddl("s", "RENAME TABLE t TO u", "t")),
        ("use s; CREATE UNIQUE INDEX i ON t (a);", Ddl("s", "CREATE UNIQUE INDEX i ON t (a)", "t")),
        ("use s; DROP INDEX i ON t;", Ddl("s", "DROP INDEX i ON t", "t")),
        (
            "use s; ALTER DATABASE CHARACTER SET utf8mb4;",
            Ddl("s", "ALTER DATABASE CHARACTER SET utf8mb4", ""),
        ),
        ("use s; CREATE VIEW v AS SELECT 1;", Ddl("s", "CREATE VIEW v AS SELECT 1", "")),
    ],
)
def test_ddl_query_read_back(text: str, expected: Ddl) -> None:
    assert parse_ddl_query(text) == expected
    assert (
        decode_txn(bytes(Binlog(BinlogType(BinlogType.DDL), 3, ddl_query=text.encode()))).ddl
        == expected
    )


def test_ddl_round_trip() -> None:
    ddl = Ddl("shop", "ALTER TABLE acct ADD COLUMN note VARCHAR(20)", "acct")
    assert ddl_query(ddl) == "use `shop`; ALTER TABLE acct ADD COLUMN note VARCHAR(20);"
    assert decode_txn(encode_txn(Txn(4, ddl=ddl)) or b"").ddl == ddl


def test_column_types() -> None:
    assert column_type("bigint unsigned").unsigned and column_type("serial").unsigned
    assert column_type("enum('a','it''s')").elems == ("a", "it's")
    assert column_type("varchar(10) character set binary").binary
    assert column_type("varchar(10) charset binary").binary
    assert not column_type("varchar(10) binary").binary  # a _bin collation, still text
    assert column_type("char varying(3)").tp == 15
    assert column_type("geography").tp is None


def test_errors_name_what_failed() -> None:
    odd = TableInfo.build("s", "t", [("g", "geography")])
    with pytest.raises(PbCodecError, match=r"s\.t\.g: unknown type 'geography'"):
        to_pb(Txn(1, rows=(RowChange.insert(odd, {"g": b""}),)))
    with pytest.raises(PbCodecError, match="commit ts 2"):
        to_pb(Txn(2, rows=(RowChange.insert(T, {"e": "zz"}),)))
    with pytest.raises(PbCodecError, match="not a pb_binlog record"):
        decode_txn(b"\xff\xff\xff")
    bad = Event(
        "s", "t", EventType(EventType.Insert), [bytes(Column(name="a", tp=b"\x03", value=b"\x63"))]
    )
    with pytest.raises(PbCodecError, match="record at commit ts 3"):
        decode_txn(bytes(Binlog(BinlogType(BinlogType.DML), 3, DmlData([bad]))))
    assert Decimal("1.5")  # Decimal values are written as their text
    out = decode_txn(encode_txn(Txn(4, rows=(RowChange.insert(T, {"d": Decimal("1.50")}),))) or b"")
    assert out.rows[0].values == {"d": "1.50"}
