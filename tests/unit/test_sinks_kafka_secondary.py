"""Transactions as tidb-binlog's secondary binlog: presence of zero values and required fields,
update rows (row = new, change_row = old), DDL, and the way back."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

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
