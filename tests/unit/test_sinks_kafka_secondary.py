"""Transactions as tidb-binlog's secondary binlog: presence of zero values and required fields,
update rows (row = new, change_row = old), DDL, the way back, and the same bytes as the plain
field-by-field encoder of ``tests/support/secondary_reference``."""

from __future__ import annotations

import random
from decimal import Decimal
from urllib.parse import urlsplit

import pytest

from tests.support import secondary_reference
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError
from tributary.sinks.kafka.secondary import SecondaryBinlogError, decode_txn, encode_txn
from tributary.wire.slave.binlog import Binlog, BinlogType, MutationType

T = TableInfo.build(
    "db",
    "t",
    [
        ("id", "bigint"),
        ("u", "int unsigned"),
        ("s", "varchar(20)"),
        ("b", "varbinary(4)"),
        ("d", "decimal(10,2)"),
        ("f", "double"),
        ("e", "enum('a','b')"),
        ("bt", "bit(8)"),
        ("n", "text"),
        ("y", "year"),
        ("dt", "datetime"),
        ("j", "json"),
    ],
    ["id"],
    {"uk_s": ["s"]},
)
ROW = {
    "id": 0,
    "u": 5,
    "s": "",
    "b": b"\x00",
    "d": "1.50",
    "f": 0.5,
    "e": "b",
    "bt": 3,
    "n": None,
    "y": 2024,
    "dt": "2024-01-02 03:04:05",
    "j": '{"a": 1}',
}


def test_insert_writes_zero_values_and_the_required_mutation_type() -> None:
    payload = encode_txn(Txn(100, rows=(RowChange.insert(T, ROW),)))
    assert payload is not None
    b = Binlog().parse(payload)
    assert (b.type, b.commit_ts) == (BinlogType.DML, 100)
    [table] = b.dml_data.tables
    assert (table.schema_name, table.table_name) == ("db", "t")
    infos = [(c.name, c.mysql_type, c.is_primary_key) for c in table.column_info]
    assert infos[:4] == [
        ("id", "bigint", True),
        ("u", "int", False),
        ("s", "varchar", False),
        ("b", "varbinary", False),
    ]
    assert [(k.name, k.column_names) for k in table.unique_keys] == [
        ("PRIMARY", ["id"]),
        ("uk_s", ["s"]),
    ]
    [mut] = table.mutations
    # type Insert (0) is on the wire (08 00), and so is int64_value 0 of the id (10 00)
    assert b"\x08\x00\x12" in payload
    assert b"\x0a\x02\x10\x00" in payload
    cols = mut.row.columns
    assert cols[1].uint64_value == 5 and cols[6].uint64_value == 2  # unsigned; enum index
    assert cols[2].string_value == "" and cols[7].bytes_value == b"\x03"
    assert cols[8].is_null and cols[9].string_value == "2024"
    assert cols[11].bytes_value == b'{"a": 1}'


def test_update_row_is_new_and_change_row_is_old() -> None:
    new = {**ROW, "s": "x"}
    payload = encode_txn(Txn(7, 6, rows=(RowChange.update(T, ROW, new),)))
    assert payload is not None
    [mut] = Binlog().parse(payload).dml_data.tables[0].mutations
    assert mut.type == MutationType.Update
    assert mut.row.columns[2].string_value == "x"
    assert mut.change_row.columns[2].string_value == ""


def test_round_trip_and_table_runs() -> None:
    other = TableInfo.build("db", "o", [("k", "int")], ["k"])
    rows = (
        RowChange.insert(T, ROW),
        RowChange.delete(T, ROW),
        RowChange.insert(other, {"k": 1}),
        RowChange.update(T, ROW, {**ROW, "s": "y"}),
    )
    payload = encode_txn(Txn(9, rows=rows))
    assert payload is not None
    assert [t.table_name for t in Binlog().parse(payload).dml_data.tables] == ["t", "o", "t"]
    back = decode_txn(payload)
    assert back.commit_ts == 9
    assert [(r.kind, r.table.qualified) for r in back.rows] == [
        (r.kind, r.table.qualified) for r in rows
    ]
    assert back.rows[0].table.primary_key == ("id",)
    assert dict(back.rows[0].values) == {**ROW, "e": 2}  # the message has no enum members
    assert dict(back.rows[3].old_values or {})["s"] == ""


def test_ddl_and_markers() -> None:
    payload = encode_txn(Txn(5, ddl=Ddl("db", "create table x (a int)", "x")))
    assert payload is not None
    b = Binlog().parse(payload)
    assert b.type == BinlogType.DDL
    assert (b.ddl_data.schema_name, b.ddl_data.table_name) == ("db", "x")
    assert b.ddl_data.ddl_query == b"create table x (a int)"
    assert decode_txn(payload).ddl == Ddl("db", "create table x (a int)", "x")
    assert encode_txn(Txn(6)) is None


def test_bad_values_and_messages_are_clear_errors() -> None:
    with pytest.raises(SecondaryBinlogError, match=r"txn 3: db\.t"):
        encode_txn(Txn(3, rows=(RowChange.insert(T, {**ROW, "id": "x"}),)))
    with pytest.raises(SecondaryBinlogError, match="not a secondary binlog"):
        decode_txn(b"\xff\xff\xff")


def test_url_settings() -> None:
    from tributary.sinks.kafka.sink import parse_url

    s = parse_url(urlsplit("kafka://a:1,b:2/?kafka-max-message-size=2MiB"), 42)
    assert (s.brokers, s.topic, s.max_message_size) == (("a:1", "b:2"), "42_obinlog", 2 << 20)
    assert parse_url(urlsplit("kafka://a:1/my%2Ftopic"), 1).topic == "my/topic"
    with pytest.raises(SinkError, match="unknown options"):
        parse_url(urlsplit("kafka://a:1/?nope=1"), 1)


WIDE = TableInfo.build(
    "db",
    "wide",
    [
        ("i8", "tinyint"),
        ("i64", "bigint"),
        ("u64", "bigint unsigned"),
        ("fl", "float"),
        ("db", "double"),
        ("dec", "decimal(20,4)"),
        ("d", "date"),
        ("ts", "timestamp(3)"),
        ("tm", "time"),
        ("y", "year"),
        ("b1", "bit(1)"),
        ("b20", "bit(20)"),
        ("ch", "char(10)"),
        ("vc", "varchar(300)"),
        ("vb", "varbinary(300)"),
        ("bin", "binary(4)"),
        ("tx", "mediumtext"),
        ("bl", "longblob"),
        ("j", "json"),
        ("e", "enum('x','y','z')"),
        ("s", "set('r','w','x')"),
        ("g", "geometry"),
    ],
    ["i64", "u64"],
    {"uk_vc": ["vc"], "uk_two": ["ch", "d"]},
)


def wide_value(rng: random.Random, column: str) -> object:
    if rng.random() < 0.15:
        return None
    size = rng.choice([0, 1, 5, 60, 123, 124, 125, 126, 127, 128, 200, 5000, 20000])
    text = "".join(rng.choices("aé€😀\udcff", k=size))  # a lone surrogate too
    match column:
        case "i8" | "i64":
            return rng.choice(
                [0, 1, 127, 128, -1, -(2**63), 2**63 - 1, rng.randrange(-(2**40), 2**40)]
            )
        case "u64" | "b20":
            edges = [4095, 4096, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**35 - 1]
            edges += [2**35, 2**42 - 1, 2**42, 2**64 - 1, True]
            return rng.choice([0, 127, 128, *edges, rng.randrange(2**20), rng.randrange(2**44)])
        case "b1":
            return rng.choice([0, 1, b"\x01"])
        case "fl" | "db":
            return rng.choice([0.0, -1.5, 1e300, 3, Decimal("2.5"), "7.25"])
        case "dec":
            return rng.choice([Decimal("0"), Decimal("-12.3400"), Decimal("1E+5"), "9.99"])
        case "d" | "ts" | "tm":
            return rng.choice(["2024-02-29", "2024-01-02 03:04:05.678", "-838:59:59"])
        case "y":
            return rng.choice([2024, "0000", 1901])
        case "vb" | "bin" | "bl" | "g":
            return rng.choice([text.encode("utf-8", "surrogateescape"), b"", b"\x00\xff" * size])
        case "j":
            return rng.choice(['{"a": [1, 2]}', text, b"[]"])
        case "e":
            return rng.choice(["x", "Z", "", 0, 2, b"y"])
        case "s":
            return rng.choice(["", "r,x", "W", 5, b"r"])
        case _:
            return rng.choice([text, text, text.encode("utf-8", "surrogateescape")])


def test_same_bytes_as_the_field_by_field_encoder() -> None:
    rng = random.Random(15)
    names = WIDE.column_names
    for ts in range(1, 151):
        rows = []
        for _ in range(rng.randrange(1, 6)):
            table = rng.choice([WIDE, WIDE, T])
            pick = (lambda c: wide_value(rng, c)) if table is WIDE else (lambda c: ROW[c])
            cols = names if table is WIDE else table.column_names
            values = {c: pick(c) for c in cols if rng.random() < 0.95}
            kind = rng.choice(["insert", "update", "delete"])
            if kind == "update":
                old = {c: pick(c) for c in cols}
                rows.append(RowChange.update(table, old, values))
            else:
                rows.append(getattr(RowChange, kind)(table, values))
        txn = Txn(ts * 2**40 + ts, rows=tuple(rows))
        assert encode_txn(txn) == secondary_reference.encode_txn(txn), ts
    ddl = Txn(2**62, ddl=Ddl("db", "alter table wide add z int" * 10, "wide"))
    assert encode_txn(ddl) == secondary_reference.encode_txn(ddl)


def test_each_table_object_has_its_own_plan() -> None:
    twin = TableInfo.build("db", "t", [(c.name, c.mysql_type) for c in T.columns], ["id"])
    for table in (T, twin, T):
        txn = Txn(3, rows=(RowChange.insert(table, ROW),))
        assert encode_txn(txn) == secondary_reference.encode_txn(txn)
