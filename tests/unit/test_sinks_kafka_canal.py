"""TiCDC's canal-json, checked field by field: the documented example messages (TiCDC's field
order, byte for byte but for the ``ts`` wall clock), the sqlType and mysqlType tables in both
the default and the ``content-compatible`` form, value texts (Go's float formatting, ISO-8859-1
binary strings, Go's JSON escapes), ``pkNames``, DDL types, the URL keys, and reading both
forms back."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from urllib.parse import urlsplit

import pytest

from tributary.change import Ddl, RowChange, TableInfo
from tributary.sinks import SinkError
from tributary.sinks.file.pbcodec import column_type
from tributary.sinks.kafka import canal
from tributary.sinks.kafka.canal_types import ddl_type, go_float, mysql_type, sql_type
from tributary.sinks.kafka.cdc_base import parse_url
from tributary.sinks.kafka.secondary import type_name

TS = 429918007904436226  # the documented examples' TSO; es = TS >> 18 = 1639633094670 + ...
TP_INT = TableInfo.build(
    "test",
    "tp_int",
    [
        ("id", "int"), ("c_tinyint", "tinyint"), ("c_smallint", "smallint"),
        ("c_mediumint", "mediumint"), ("c_int", "int"), ("c_bigint", "bigint"),
    ],
    ["id"],
)  # fmt: skip
ROW = {
    "id": 2, "c_tinyint": 127, "c_smallint": 32767, "c_mediumint": 8388607,
    "c_int": 2147483647, "c_bigint": 9223372036854775807,
}  # fmt: skip
UPDATED = {**ROW, "c_int": 0, "c_tinyint": 0}


def wall(msg: bytes) -> str:
    """The message with its ``ts`` (the time it was made) replaced by ``T``."""
    text, n = re.subn(r',"ts":\d{13},', ',"ts":T,', msg.decode())
    assert n == 1
    return text


def test_insert_as_documented() -> None:
    msg = canal.encode_row(
        RowChange.insert(TP_INT, ROW), TS, canal.Columns.of(TP_INT), extension=True
    )
    assert wall(msg) == (
        '{"id":0,"database":"test","table":"tp_int","pkNames":["id"],"isDdl":false,'
        '"type":"INSERT","es":1640007049196,"ts":T,"sql":"",'
        '"sqlType":{"id":4,"c_tinyint":-6,"c_smallint":5,"c_mediumint":4,"c_int":4,'
        '"c_bigint":-5},'
        '"mysqlType":{"id":"int","c_tinyint":"tinyint","c_smallint":"smallint",'
        '"c_mediumint":"mediumint","c_int":"int","c_bigint":"bigint"},'
        '"old":null,'
        '"data":[{"id":"2","c_tinyint":"127","c_smallint":"32767","c_mediumint":"8388607",'
        '"c_int":"2147483647","c_bigint":"9223372036854775807"}],'
        '"_tidb":{"commitTs":429918007904436226}}'
    )


def test_update_old_holds_every_column_by_default() -> None:
    change = RowChange.update(TP_INT, ROW, UPDATED)
    msg = json.loads(canal.encode_row(change, TS, canal.Columns.of(TP_INT), extension=False))
    assert list(msg)[-2:] == ["old", "data"]  # TiCDC's DML order; no _tidb without extension
    assert msg["type"] == "UPDATE"
    assert msg["old"] == [{k: str(v) for k, v in ROW.items()}]
    assert msg["data"] == [{k: str(v) for k, v in UPDATED.items()}]


def test_content_compatible_writes_full_types_and_the_changed_old_columns() -> None:
    change = RowChange.update(TP_INT, ROW, UPDATED)
    cols = canal.Columns.of(TP_INT, compatible=True)
    msg = json.loads(canal.encode_row(change, TS, cols, extension=False))
    assert msg["old"] == [{"c_tinyint": "127", "c_int": "2147483647"}]  # the documented one
    assert msg["mysqlType"] == {
        "id": "int(11)", "c_tinyint": "tinyint(4)", "c_smallint": "smallint(6)",
        "c_mediumint": "mediumint(9)", "c_int": "int(11)", "c_bigint": "bigint(20)",
    }  # fmt: skip
    only = canal.Columns.of(TP_INT, only_updated=True)
    msg = json.loads(canal.encode_row(change, TS, only, extension=False))
    assert msg["old"] == [{"c_tinyint": "127", "c_int": "2147483647"}]
    assert msg["mysqlType"]["id"] == "int"


def test_delete_has_the_row_in_data_and_old_null() -> None:
    change = RowChange.delete(TP_INT, UPDATED)
    msg = json.loads(canal.encode_row(change, TS, canal.Columns.of(TP_INT), extension=False))
    assert msg["type"] == "DELETE" and msg["old"] is None
    assert msg["data"] == [{k: str(v) for k, v in UPDATED.items()}]


def test_ddl_and_watermark_as_documented() -> None:
    ddl = canal.encode_ddl(Ddl("test", "drop database if exists test"), TS, extension=True)
    assert wall(ddl) == (
        '{"id":0,"database":"test","table":"","pkNames":null,"isDdl":true,"type":"QUERY",'
        '"es":1640007049196,"ts":T,"sql":"drop database if exists test","sqlType":null,'
        '"mysqlType":null,"data":null,"old":null,"_tidb":{"commitTs":429918007904436226}}'
    )
    bare = canal.encode_ddl(Ddl("db", "CREATE TABLE t (a int)", "t"), TS, extension=False)
    assert wall(bare).endswith('"data":null,"old":null}')
    assert wall(canal.encode_watermark(TS)) == (
        '{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK",'
        '"es":1640007049196,"ts":T,"sql":"","sqlType":null,"mysqlType":null,"data":null,'
        '"old":null,"_tidb":{"watermarkTs":429918007904436226}}'
    )


@pytest.mark.parametrize(
    ("declared", "value", "code"),
    [
        ("tinyint", -128, -6), ("tinyint unsigned", 127, -6), ("tinyint unsigned", 128, 5),
        ("smallint", 32767, 5), ("smallint unsigned", 32767, 5), ("smallint unsigned", 32768, 4),
        ("mediumint", -8388608, 4), ("mediumint unsigned", 8388607, 4),
        ("mediumint unsigned", 8388608, 4), ("mediumint unsigned", 16777215, 4),
        ("int", 2147483647, 4), ("int unsigned", 2147483647, 4),
        ("int unsigned", 2147483648, -5), ("bigint", -(1 << 63), -5),
        ("bigint unsigned", (1 << 63) - 1, -5), ("bigint unsigned", 1 << 63, 3),
        ("bigint unsigned", None, -5), ("tinyint(1)", 1, -6),
    ],
)  # fmt: skip
def test_integer_sql_types_follow_the_documented_table(
    declared: str, value: int | None, code: int
) -> None:
    ct = column_type(declared)
    assert sql_type(ct, type_name(ct), value) == code


@pytest.mark.parametrize(
    ("declared", "code", "bare", "full"),
    [
        ("float", 7, "float", "float"), ("float unsigned", 7, "float unsigned", "float unsigned"),
        ("double", 8, "double", "double"), ("decimal(10,4)", 3, "decimal", "decimal(10,4)"),
        ("decimal(5)", 3, "decimal", "decimal(5,0)"),
        ("decimal(10,2) unsigned", 3, "decimal unsigned", "decimal(10,2) unsigned"),
        ("char(16)", 1, "char", "char(16)"), ("varchar(16)", 12, "varchar", "varchar(16)"),
        ("binary(16)", 2004, "binary", "binary(16)"),
        ("varbinary(16)", 2004, "varbinary", "varbinary(16)"),
        ("char(4) character set binary", 2004, "binary", "binary(4)"),
        ("varchar(4) charset binary", 2004, "varbinary", "varbinary(4)"),
        ("tinytext", 2005, "tinytext", "tinytext"), ("text", 2005, "text", "text"),
        ("mediumtext", 2005, "mediumtext", "mediumtext"),
        ("longtext", 2005, "longtext", "longtext"),
        ("tinyblob", 2004, "tinyblob", "tinyblob"), ("blob", 2004, "blob", "blob"),
        ("mediumblob", 2004, "mediumblob", "mediumblob"),
        ("longblob", 2004, "longblob", "longblob"),
        ("date", 91, "date", "date"), ("datetime", 93, "datetime", "datetime"),
        ("datetime(3)", 93, "datetime", "datetime(3)"),
        ("timestamp(6)", 93, "timestamp", "timestamp(6)"),
        ("time", 92, "time", "time"), ("time(3)", 92, "time", "time(3)"),
        ("year", 12, "year", "year(4)"),
        ("enum('a','b','c')", 4, "enum", "enum('a','b','c')"),
        ("set('a','b','c')", -7, "set", "set('a','b','c')"),
        ("bit(64)", -7, "bit", "bit(64)"), ("bit", -7, "bit", "bit(1)"),
        ("json", 12, "json", "json"),
        ("int", 4, "int", "int(11)"), ("int unsigned", 4, "int unsigned", "int(10) unsigned"),
        ("tinyint unsigned", -6, "tinyint unsigned", "tinyint(3) unsigned"),
        ("int(5) unsigned zerofill", 4, "int unsigned zerofill", "int(5) unsigned zerofill"),
        ("bigint zerofill", -5, "bigint unsigned zerofill", "bigint(20) unsigned zerofill"),
    ],
)  # fmt: skip
def test_sql_and_mysql_types(declared: str, code: int, bare: str, full: str) -> None:
    ct = column_type(declared)
    name = type_name(ct)
    assert sql_type(ct, name, None) == code
    assert mysql_type(ct, name, declared, full=False) == bare
    assert mysql_type(ct, name, declared, full=True) == full


DOC_T = TableInfo.build(
    "test",
    "t",
    [
        ("id", "int"), ("c_decimal", "decimal(10,4)"), ("c_char", "char(16)"),
        ("c_varchar", "varchar(16)"), ("c_binary", "binary(16)"), ("c_varbinary", "varbinary(16)"),
        ("c_enum", "enum('a','b','c')"), ("c_set", "set('a','b','c')"), ("c_bit", "bit(64)"),
    ],
    ["id"],
)  # fmt: skip
DOC_ROW = {
    "id": 1, "c_decimal": "123.4560", "c_char": "abc", "c_varchar": "abc",
    "c_binary": b"abc".ljust(16, b"\0"), "c_varbinary": b"abc", "c_enum": "a", "c_set": "a,b",
    "c_bit": 65,
}  # fmt: skip


def test_the_documented_mysql_type_example_in_both_forms() -> None:
    change = RowChange.insert(DOC_T, DOC_ROW)
    bare = json.loads(canal.encode_row(change, TS, canal.Columns.of(DOC_T), extension=False))
    assert bare["mysqlType"] == {
        "id": "int", "c_decimal": "decimal", "c_char": "char", "c_varchar": "varchar",
        "c_binary": "binary", "c_varbinary": "varbinary", "c_enum": "enum", "c_set": "set",
        "c_bit": "bit",
    }  # fmt: skip
    assert bare["sqlType"] == {
        "id": 4, "c_decimal": 3, "c_char": 1, "c_varchar": 12, "c_binary": 2004,
        "c_varbinary": 2004, "c_enum": 4, "c_set": -7, "c_bit": -7,
    }  # fmt: skip
    assert bare["data"] == [
        {"id": "1", "c_decimal": "123.4560", "c_char": "abc", "c_varchar": "abc",
         "c_binary": "abc" + "\0" * 13, "c_varbinary": "abc", "c_enum": "1", "c_set": "3",
         "c_bit": "65"}
    ]  # fmt: skip
    cols = canal.Columns.of(DOC_T, compatible=True)
    full = json.loads(canal.encode_row(change, TS, cols, extension=False))
    assert full["mysqlType"] == {
        "id": "int(11)", "c_decimal": "decimal(10,4)", "c_char": "char(16)",
        "c_varchar": "varchar(16)", "c_binary": "binary(16)", "c_varbinary": "varbinary(16)",
        "c_enum": "enum('a','b','c')", "c_set": "set('a','b','c')", "c_bit": "bit(64)",
    }  # fmt: skip


def test_binary_bytes_as_documented() -> None:
    t = TableInfo.build("test", "b", [("id", "int"), ("c_varbinary", "varbinary(16)")], ["id"])
    raw = bytes([5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255, 254, 45, 55, 70])
    msg = canal.encode_row(
        RowChange.insert(t, {"id": 1, "c_varbinary": raw}), TS, canal.Columns.of(t), extension=False
    )
    assert '"c_varbinary":"\\u0005\\u0007\\n\\u000f$2+cx\\u003c\\u0026ÿþ-7F"' in msg.decode()
    assert canal.decode(msg).row.values["c_varbinary"] == raw  # type: ignore[union-attr]


def test_strings_escape_as_go_does() -> None:
    assert canal.jstr('a"\\\b\f\t\x7f<>&\u2028é') == (
        '"a\\"\\\\\\u0008\\u000c\\t\x7f\\u003c\\u003e\\u0026\\u2028é"'
    )


@pytest.mark.parametrize(
    ("value", "bits", "text"),
    [
        (1e20, 64, "100000000000000000000"), (1e20, 32, "100000000000000000000"),
        (1.0, 64, "1"), (-0.0, 64, "-0"), (1e-7, 64, "0.0000001"), (1.1, 32, "1.1"),
        (0.1 + 0.2, 64, "0.30000000000000004"), (0.1 + 0.2, 32, "0.3"),
        (123456789.0, 32, "123456790"),
        (3.4028234663852886e38, 32, "340282350000000000000000000000000000000"),
        (float("nan"), 64, "0"),
    ],
)  # fmt: skip
def test_floats_as_go_formats_them(value: float, bits: int, text: str) -> None:
    assert go_float(value, bits) == text


def test_values_nulls_and_temporal_texts() -> None:
    t = TableInfo.build(
        "d",
        "v",
        [
            ("id", "bigint unsigned"), ("f", "float"), ("d", "double"), ("m", "decimal(6,2)"),
            ("at", "datetime(3)"), ("tm", "time(6)"), ("y", "year"), ("j", "json"),
            ("s", "varchar(8)"), ("n", "int"),
        ],
        ["id"],
    )  # fmt: skip
    row = {
        "id": 18446744073709551615, "f": 1e20, "d": 2.5, "m": Decimal("-1.50"),
        "at": "2026-11-21 10:00:00.007", "tm": "-838:59:59.000000", "y": 2024,
        "j": '{"a": [1, 2]}', "s": "<é>", "n": None,
    }  # fmt: skip
    msg = json.loads(
        canal.encode_row(RowChange.insert(t, row), TS, canal.Columns.of(t), extension=False)
    )
    assert msg["data"] == [
        {"id": "18446744073709551615", "f": "100000000000000000000", "d": "2.5", "m": "-1.50",
         "at": "2026-11-21 10:00:00.007", "tm": "-838:59:59.000000", "y": "2024",
         "j": '{"a": [1, 2]}', "s": "<é>", "n": None}
    ]  # fmt: skip
    assert msg["sqlType"]["id"] == 3 and msg["sqlType"]["n"] == 4


def test_pk_names_in_column_order_and_empty_without_a_key() -> None:
    t = TableInfo.build("d", "k", [("a", "int"), ("b", "int"), ("c", "int")], ["c", "a"])
    assert canal.Columns.of(t).pk_json == '["a","c"]'
    none = TableInfo.build("d", "n", [("a", "int")])
    msg = canal.encode_row(
        RowChange.insert(none, {"a": 1}), TS, canal.Columns.of(none), extension=False
    )
    assert json.loads(msg)["pkNames"] == []


def test_a_geometry_column_is_refused_by_name() -> None:
    t = TableInfo.build("d", "g", [("id", "int"), ("spot", "point")], ["id"])
    with pytest.raises(canal.CanalJsonError, match=r"d\.g\.spot: a point column"):
        canal.Columns.of(t)


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("CREATE TABLE t (a int)", "CREATE"), ("create table if not exists t like u", "CREATE"),
        ("DROP TABLE t", "ERASE"), ("TRUNCATE TABLE t", "TRUNCATE"),
        ("RENAME TABLE a TO b, c TO d", "RENAME"), ("ALTER TABLE t RENAME TO u", "RENAME"),
        ("CREATE UNIQUE INDEX i ON t (a)", "CINDEX"), ("ALTER TABLE t ADD INDEX i (a)", "CINDEX"),
        ("ALTER TABLE t ADD PRIMARY KEY (a)", "CINDEX"),
        ("ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (b)", "CINDEX"),
        ("DROP INDEX i ON t", "DINDEX"), ("ALTER TABLE t DROP KEY i", "DINDEX"),
        ("ALTER TABLE t DROP FOREIGN KEY fk", "DINDEX"),
        ("ALTER TABLE db.t ADD COLUMN c int", "ALTER"), ("ALTER TABLE t MODIFY c bigint", "ALTER"),
        ("ALTER TABLE t RENAME COLUMN a TO b", "ALTER"),
        ("ALTER TABLE t ADD COLUMN c int, ADD INDEX (c)", "ALTER"),
        ("ALTER TABLE t ADD CONSTRAINT c CHECK (a > 0)", "QUERY"),
        ("CREATE DATABASE d", "QUERY"), ("DROP DATABASE d", "QUERY"),
        ("CREATE VIEW v AS SELECT 1", "QUERY"), ("ALTER DATABASE d CHARSET utf8mb4", "QUERY"),
    ],
)  # fmt: skip
def test_ddl_types(query: str, kind: str) -> None:
    assert ddl_type(query) == kind


def test_content_compatible_url_key() -> None:
    base = "kafka://127.0.0.1:9092/t?partition-num=3"
    s = parse_url(urlsplit(base + "&content-compatible=true"), "canal-json")
    assert s.content_compatible and not s.only_updated
    s = parse_url(urlsplit(base + "&only-output-updated-columns=true"), "canal-json")
    assert s.only_updated and not s.content_compatible
    assert not parse_url(urlsplit(base), "canal-json").content_compatible
    with pytest.raises(SinkError, match="content-compatible must be true or false, not 'maybe'"):
        parse_url(urlsplit(base + "&content-compatible=maybe"), "canal-json")
    with pytest.raises(SinkError, match=r"unknown options \['content-compatible'\]"):
        parse_url(urlsplit(base + "&content-compatible=true"), "open-protocol")


T = TableInfo.build(
    "shop",
    "items",
    [
        ("id", "int"), ("e", "enum('x','y')"), ("s", "set('a','b','c')"), ("raw", "blob"),
        ("f", "float"), ("m", "decimal(10,2)"), ("b", "bit(8)"), ("u", "tinyint unsigned"),
    ],
    ["id"],
)  # fmt: skip
OLD = {"id": 7, "e": "x", "s": "a,c", "raw": b"\x00\xff", "f": 1.5, "m": "2.50", "b": 3, "u": 200}
NEW = {**OLD, "e": "y", "m": "5.00"}


def test_decode_reads_both_forms() -> None:
    change = RowChange.update(T, OLD, NEW)
    full = canal.decode(
        canal.encode_row(change, TS, canal.Columns.of(T, compatible=True), extension=True)
    )
    assert full.commit_ts == TS and full.row is not None
    assert full.row.values == NEW and full.row.old_values == OLD  # names from the members
    bare = canal.decode(canal.encode_row(change, TS, canal.Columns.of(T), extension=False))
    assert bare.commit_ts == 0 and bare.row is not None
    numbers = {"e": 2, "s": 5}  # bare "enum"/"set": the index and the mask
    assert bare.row.values == {**NEW, **numbers}
    assert bare.row.old_values == {**OLD, "e": 1, "s": 5}
    assert bare.row.table.primary_key == ("id",)
    deleted = canal.decode(
        canal.encode_row(RowChange.delete(T, OLD), TS, canal.Columns.of(T), extension=True)
    )
    assert deleted.row is not None and deleted.row.kind.value == "delete"
    assert deleted.row.values == {**OLD, "e": 1, "s": 5}
    drop = Ddl("shop", "DROP TABLE items", "items")
    ddl = canal.decode(canal.encode_ddl(drop, 9, extension=True))
    assert ddl.ddl == Ddl("shop", "DROP TABLE items", "items") and ddl.commit_ts == 9
    assert canal.decode(canal.encode_watermark(12)) == canal.CanalEvent(12, watermark=True)


@pytest.mark.parametrize(
    "payload",
    [b"", b"{}", b'{"type":"INSERT","isDdl":false}', b'{"type":"X","isDdl":false,"database":"d",'
     b'"table":"t","mysqlType":{"a":"int"},"data":[{"a":"1"}]}',
     b'{"type":"INSERT","isDdl":false,"database":"d","table":"t","mysqlType":{"a":"int"},'
     b'"data":[{"a":1}]}'],
)  # fmt: skip
def test_decode_refuses_what_is_not_canal_json(payload: bytes) -> None:
    with pytest.raises(canal.CanalJsonError, match="not a canal-json message"):
        canal.decode(payload)


def test_a_claim_check_reference_carries_the_handle_key_and_the_location() -> None:
    change = RowChange.update(TP_INT, ROW, UPDATED)
    where = "file:///claims/4f0c.json"
    msg = canal.encode_row(change, TS, canal.Columns.of(TP_INT), extension=True, claim_check=where)
    assert wall(msg) == (
        '{"id":0,"database":"test","table":"tp_int","pkNames":["id"],"isDdl":false,'
        '"type":"UPDATE","es":1640007049196,"ts":T,"sql":"","sqlType":{"id":4},'
        '"mysqlType":{"id":"int"},"old":[{"id":"2"}],"data":[{"id":"2"}],'
        '"_tidb":{"commitTs":429918007904436226,"claimCheckLocation":"file:///claims/4f0c.json"}}'
    )  # TiCDC's form: the handle key columns alone
    ref = canal.decode(msg)
    assert ref.claim_check == where and ref.commit_ts == TS and ref.row is not None
    assert ref.row.values == {"id": 2}
    keyless = TableInfo.build("test", "log", [("a", "int"), ("b", "varchar(8)")], [])
    row = RowChange.insert(keyless, {"a": 1, "b": "x"})  # no key: every column identifies it
    msg = canal.encode_row(row, TS, canal.Columns.of(keyless), extension=True, claim_check=where)
    assert json.loads(msg)["data"] == [{"a": "1", "b": "x"}]
    plain = canal.decode(canal.encode_row(row, TS, canal.Columns.of(keyless), extension=True))
    assert plain.claim_check is None


def test_claim_check_url_keys_for_canal_json_need_the_tidb_extension() -> None:
    base = "kafka://127.0.0.1:9092/t?large-message-handle-option=claim-check"
    claims = "&claim-check-storage-uri=file:///var/claims"
    s = parse_url(urlsplit(base + claims + "&enable-tidb-extension=true"), "canal-json")
    assert (s.large_message, s.claim_check_uri) == ("claim-check", "file:///var/claims")
    with pytest.raises(SinkError, match="claim-check needs enable-tidb-extension=true"):
        parse_url(urlsplit(base + claims), "canal-json")
    with pytest.raises(SinkError, match="needs claim-check-storage-uri=file:///DIR"):
        parse_url(urlsplit(base + "&enable-tidb-extension=true"), "canal-json")
