"""The debezium protocol's messages, checked field by field against Debezium's and TiCDC's forms:
every column type's schema and value, keys, the envelope, handle-key updates, tombstones, DDL
and watermark events, the URL options, and the defaults read from DDL."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from tributary.change import ColumnInfo, Ddl, Row, RowChange, RowKind, SqlValue, TableInfo
from tributary.sinks.kafka import debezium as dbz
from tributary.sinks.kafka.cdc_base import parse_url
from tributary.sinks.kafka.debezium_defaults import DefaultsFromDdl
from tributary.sinks.kafka.debezium_sink import DebeziumSettings
from tributary.sinks.kafka.debezium_types import DebeziumError, Options, decimal_bytes, field
from tributary.sinks.port import SinkError
from tributary.wire.ts import compose

TS = compose(1_795_255_200_000, 3)


def _plan(info: TableInfo, opts: Options | None = None, **defaults: str) -> dbz.TablePlan:
    return dbz.TablePlan.of(info, opts or Options(), "default", defaults)


def _messages(change: RowChange, plan: dbz.TablePlan, **kw: Any) -> list[tuple[Any, Any]]:
    args = {"with_schema": True, "old_value": True, "tombstones": False, **kw}
    out = dbz.row_messages(change, plan, TS, "default", **args)
    return [(json.loads(k) if k else None, json.loads(v) if v else None) for k, v, _ in out]


def _one(mysql_type: str, value: SqlValue, opts: Options | None = None) -> tuple[Any, Any]:
    info = TableInfo.build("db", "t", [("id", "int"), ("c", mysql_type)], ["id"])
    (_, v), *_ = _messages(RowChange.insert(info, {"id": 1, "c": value}), _plan(info, opts))
    schema = v["schema"]["fields"][1]["fields"][1]
    return schema, v["payload"]["after"]["c"]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("mysql_type", "value", "schema", "out"),
    [
        ("tinyint", -5, {"type": "int16"}, -5),
        ("tinyint unsigned", 255, {"type": "int16"}, 255),
        ("smallint", -300, {"type": "int16"}, -300),
        ("smallint unsigned", 65535, {"type": "int32"}, 65535),
        ("mediumint unsigned", 16777215, {"type": "int32"}, 16777215),
        ("int", -(2**31), {"type": "int32"}, -(2**31)),
        ("int unsigned", 2**32 - 1, {"type": "int64"}, 2**32 - 1),
        ("bigint", -(2**63), {"type": "int64"}, -(2**63)),
        ("bigint unsigned", 2**63 - 1, {"type": "int64"}, 2**63 - 1),
        ("float", 7.1, {"type": "float"}, 7.1),
        ("double", 0.1, {"type": "double"}, 0.1),
        (
            "decimal(10,2)", "-7.25",
            {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
             "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
            _b64((-725).to_bytes(2, "big", signed=True)),
        ),
        ("date", "2026-11-21", {"type": "int32", "name": "io.debezium.time.Date"}, 20778),
        (
            "datetime(3)", "2026-11-21 10:00:00.007",
            {"type": "int64", "name": "io.debezium.time.Timestamp"}, 1795255200007,
        ),
        (
            "datetime(6)", "1969-12-31 23:59:59.999999",
            {"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, -1,
        ),
        (
            "timestamp(2)", "2026-11-21 10:00:00.50",
            {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
            "2026-11-21T10:00:00.50Z",
        ),
        (
            "time(2)", "-838:59:59.50",
            {"type": "int64", "name": "io.debezium.time.MicroTime"},
            -(838 * 3600 + 59 * 60 + 59) * 1_000_000 - 500_000,
        ),
        ("year", 2026, {"type": "int32", "name": "io.debezium.time.Year"}, 2026),
        ("varchar(32)", "a<é>\n", {"type": "string"}, "a<é>\n"),
        ("varbinary(8)", b"\x00\xff<", {"type": "bytes"}, _b64(b"\x00\xff<")),
        (
            "enum('new','paid')", "paid",
            {"type": "string", "name": "io.debezium.data.Enum",
             "parameters": {"allowed": "new,paid"}}, "paid",
        ),
        (
            "set('a','b','c')", "a,c",
            {"type": "string", "name": "io.debezium.data.EnumSet",
             "parameters": {"allowed": "a,b,c"}}, "a,c",
        ),
        ("bit(1)", 1, {"type": "boolean"}, True),
        (
            "bit(12)", 0b1000_0000_0101,
            {"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": "12"}},
            _b64(bytes([0b101, 0b1000])),
        ),
        ("json", '{"a": [1]}', {"type": "string", "name": "io.debezium.data.Json"}, '{"a": [1]}'),
    ],
)  # fmt: skip
def test_each_type_as_debeziums_mysql_connector_writes_it(
    mysql_type: str, value: SqlValue, schema: dict[str, Any], out: object
) -> None:
    got, written = _one(mysql_type, value)
    assert {k: got[k] for k in schema} == schema
    assert got["optional"] is True and got["field"] == "c"
    assert list(got) == [k for k in ("type", "optional", "name", "version", "parameters",
                                     "default", "field") if k in got]  # fmt: skip
    assert written == out


def test_decimal_bytes_are_javas_big_integer_bytes() -> None:
    assert [decimal_bytes(n).hex() for n in (0, 127, 128, -1, -128, -129, 2**64 - 1)] == [
        "00", "7f", "0080", "ff", "80", "ff7f", "00ffffffffffffffff"
    ]  # fmt: skip


def test_decimal_modes_and_unsigned_bigint_modes() -> None:
    assert (
        _one("decimal(30,10)", "12345678901234567890.0123456789", Options(decimal="string"))[1]
        == "12345678901234567890.0123456789"
    )
    schema, v = _one("decimal(4,1)", "1.5", Options(decimal="double"))
    assert (schema["type"], v) == ("double", 1.5)
    wide = "-" + "9" * 35 + "." + "9" * 30  # DECIMAL(65,30): every digit kept
    unscaled = int.from_bytes(base64.b64decode(_one("decimal(65,30)", wide)[1]), "big", signed=True)
    assert unscaled == -int("9" * 65)
    with pytest.raises(DebeziumError, match="more than 1 digits"):
        _one("decimal(4,1)", "1.55")
    with pytest.raises(DebeziumError, match="does not fit int64"):
        _one("bigint unsigned", 2**64 - 1)
    schema, v = _one("bigint unsigned", 2**64 - 1, Options(unsigned_bigint="precise"))
    assert schema["parameters"] == {"scale": "0", "connect.decimal.precision": "20"}
    assert int.from_bytes(base64.b64decode(v), "big", signed=True) == 2**64 - 1
    assert _one("bigint unsigned", 2**64 - 1, Options(unsigned_bigint="string"))[1] == str(
        2**64 - 1
    )


def test_binary_modes_time_zone_and_values_without_an_exact_form() -> None:
    assert _one("blob", b"\xfa", Options(binary="hex")) == ({"type": "string", "optional": True,
                                                              "field": "c"}, "fa")  # fmt: skip
    assert _one("blob", b"\xfb\xff", Options(binary="base64-url-safe"))[1] == "-_8="
    cet = Options(tz=__import__("zoneinfo").ZoneInfo("Europe/Berlin"))
    assert _one("timestamp", "2026-07-01 12:00:00", cet)[1] == "2026-07-01T10:00:00Z"
    assert _one("date", "0000-00-00")[1] is None  # nullable: null
    info = TableInfo.build("db", "t", [("id", "int"), ("d", "datetime")], ["id"], not_null=["d"])
    ((_, v),) = _messages(
        RowChange.insert(info, {"id": 1, "d": "0000-00-00 00:00:00"}), _plan(info)
    )
    assert v["payload"]["after"]["d"] == 0  # NOT NULL: the epoch, as Debezium
    with pytest.raises(DebeziumError, match="no debezium form"):
        field(ColumnInfo("g", "geometry"), Options(), "db.t")
    with pytest.raises(DebeziumError, match="cannot write a row"):
        _one("varchar(3)", b"\xff")  # not UTF-8: refused, never replaced


SHOP = TableInfo.build(
    "shop", "items", [("id", "int"), ("name", "varchar(32)"), ("n", "int")], ["id"],
    not_null=["n"],
)  # fmt: skip


def test_envelope_key_and_source_as_ticdc_writes_them() -> None:
    plan = _plan(SHOP, n="7")
    ((key, value),) = _messages(RowChange.insert(SHOP, {"id": 1, "name": "x", "n": 2}), plan)
    assert key == {
        "payload": {"id": 1},
        "schema": {"type": "struct", "optional": False, "name": "default.shop.items.Key",
                   "fields": [{"type": "int32", "optional": False, "field": "id"}]},
    }  # fmt: skip
    payload = value["payload"]
    assert list(payload) == ["source", "ts_ms", "transaction", "op", "before", "after"]
    assert payload["source"] == {
        "version": "2.4.0.Final", "connector": "TiCDC", "name": "default",
        "ts_ms": 1_795_255_200_000, "snapshot": "false", "db": "shop", "table": "items",
        "server_id": 0, "gtid": None, "file": "", "pos": 0, "row": 0, "thread": 0,
        "query": None, "commit_ts": TS, "cluster_id": "default",
    }  # fmt: skip
    assert (payload["op"], payload["before"]) == ("c", None)
    assert payload["after"] == {"id": 1, "name": "x", "n": 2}
    schema = value["schema"]
    assert (schema["name"], schema["version"]) == ("default.shop.items.Envelope", 1)
    names = [f["field"] for f in schema["fields"]]
    assert names == ["before", "after", "source", "op", "ts_ms", "transaction"]
    source_fields = [f["field"] for f in schema["fields"][2]["fields"]]
    assert set(payload["source"]) <= set(source_fields)
    n = schema["fields"][1]["fields"][2]
    assert n == {"type": "int32", "optional": False, "default": 7, "field": "n"}


def test_update_delete_and_a_handle_key_change() -> None:
    plan = _plan(SHOP)
    old: Row = {"id": 1, "name": "a", "n": 1}
    new: Row = {"id": 1, "name": "b", "n": 1}
    ((_, v),) = _messages(RowChange.update(SHOP, old, new), plan)
    assert (v["payload"]["op"], v["payload"]["before"]["name"]) == ("u", "a")
    ((_, v),) = _messages(RowChange.update(SHOP, old, new), plan, old_value=False)
    assert "before" not in v["payload"]
    ((k, v), (tk, tv)) = _messages(RowChange.delete(SHOP, old), plan, tombstones=True)
    assert (v["payload"]["op"], v["payload"]["after"], tk, tv) == ("d", None, k, None)
    moved = _messages(RowChange.update(SHOP, old, {**new, "id": 2}), plan, tombstones=True)
    assert [(k["payload"], v and v["payload"]["op"]) for k, v in moved] == [
        ({"id": 1}, "d"), ({"id": 1}, None), ({"id": 2}, "c")
    ]  # fmt: skip


def test_keys_unique_key_fallback_none_and_disabled_schema() -> None:
    uk = TableInfo.build(
        "db", "u", [("a", "int"), ("b", "int")], unique_keys={"uk": ["b"]}, not_null=["b"]
    )
    assert dbz.handle_key(uk) == ("b",)
    nullable_uk = TableInfo.build(
        "db", "u", [("a", "int"), ("b", "int")], unique_keys={"uk": ["b"]}
    )
    assert dbz.handle_key(nullable_uk) == ()
    ((key, _),) = _messages(RowChange.insert(nullable_uk, {"a": 1, "b": 2}), _plan(nullable_uk))
    assert key is None  # no handle key: a null key, as Debezium's for a table without one
    ((key, value),) = _messages(
        RowChange.insert(SHOP, {"id": 1, "name": None, "n": 0}), _plan(SHOP), with_schema=False
    )
    assert key == {"payload": {"id": 1}} and list(value) == ["payload"]


def test_ddl_and_watermark_events() -> None:
    key, value = dbz.encode_ddl(
        Ddl("shop", "ALTER TABLE items ADD COLUMN c INT", "items"), TS, "default", with_schema=True
    )
    k, v = json.loads(key), json.loads(value)
    assert k["payload"] == {"databaseName": "shop"}
    assert k["schema"]["name"] == "io.debezium.connector.mysql.SchemaChangeKey"
    assert v["schema"]["name"] == "io.debezium.connector.mysql.SchemaChangeValue"
    p = v["payload"]
    assert (p["databaseName"], p["schemaName"], p["ddl"]) == (
        "shop",
        None,
        "ALTER TABLE items ADD COLUMN c INT",
    )
    assert p["tableChanges"] == [{"type": "ALTER", "id": '"shop"."items"', "table": None}]
    assert [dbz.ddl_change(q) for q in (
        "CREATE TABLE t (a int)", "DROP TABLE t", "TRUNCATE t", "CREATE DATABASE x",
        "DROP DATABASE x", "RENAME TABLE a TO b", "GRANT ALL ON *.* TO u",
        "CREATE VIEW v AS SELECT 1",
    )] == ["CREATE", "DROP", "DROP", "CREATE", "DROP", "ALTER", None, None]  # fmt: skip
    key, value = dbz.encode_watermark(TS, "default", with_schema=True)
    v = json.loads(value)
    assert v["payload"]["op"] == "m" and v["payload"]["source"]["commit_ts"] == TS
    assert json.loads(key)["schema"]["name"] == "default.watermark.Key"


def test_propagated_source_types() -> None:
    opts = Options(propagate=True, unsigned_bigint="precise")
    assert _one("varchar(16)", "x", opts)[0]["parameters"] == {
        "__debezium.source.column.type": "VARCHAR", "__debezium.source.column.length": "16"
    }  # fmt: skip
    params = _one("decimal(12,3)", "1.5", opts)[0]["parameters"]
    assert params["__debezium.source.column.scale"] == "3" and params["scale"] == "3"
    assert (
        _one("bigint unsigned", 1, opts)[0]["parameters"]["__debezium.source.column.type"]
        == "BIGINT UNSIGNED"
    )


def test_url_options() -> None:
    def settings(query: str) -> DebeziumSettings:
        url = urlsplit(f"kafka://k:9092/t?{query}")
        parse_url(url, "debezium")
        return DebeziumSettings(dict(p.split("=", 1) for p in query.split("&") if p))

    s = settings("")
    assert (s.with_schema, s.old_value, s.tombstones, s.schema_change_topic) == (
        True, True, False, "")  # fmt: skip
    assert s.options == Options()
    s = settings(
        "debezium-disable-schema=true&debezium-output-old-value=false&"
        "debezium-decimal-handling-mode=string&debezium-bigint-unsigned-handling-mode=precise&"
        "debezium-binary-handling-mode=hex&debezium-tombstones-on-delete=true&"
        "debezium-schema-change-topic=ddl&time-zone=Asia/Shanghai&enable-tidb-extension=true"
    )
    assert (s.with_schema, s.old_value, s.tombstones, s.schema_change_topic) == (
        False, False, True, "ddl")  # fmt: skip
    assert (s.options.decimal, s.options.unsigned_bigint, s.options.binary) == (
        "string", "precise", "hex")  # fmt: skip
    with pytest.raises(SinkError, match="decimal-handling-mode"):
        settings("debezium-decimal-handling-mode=exact")
    with pytest.raises(SinkError, match="unknown options"):
        parse_url(urlsplit("kafka://k:9092/t?max-batch-size=3"), "debezium")


def test_defaults_read_from_ddl() -> None:
    d = DefaultsFromDdl()
    for q in (
        "CREATE TABLE `shop`.`t` (`id` BIGINT NOT NULL, k INT NOT NULL DEFAULT 0, "
        "c VARCHAR(9) DEFAULT _utf8mb4'x', at DATETIME DEFAULT CURRENT_TIMESTAMP, "
        "e DECIMAL(4,1) DEFAULT -1.5, b BIT(3) DEFAULT b'101', PRIMARY KEY (id), KEY i (k))",
        "ALTER TABLE t ADD COLUMN n INT NOT NULL DEFAULT 7, ADD (m INT DEFAULT 1, o INT), "
        "ADD INDEX j (n)",
        "ALTER TABLE t ALTER COLUMN k SET DEFAULT 3, DROP COLUMN c, CHANGE e f DECIMAL(4,1)",
        "RENAME TABLE t TO u",
        "not a statement at all",
    ):
        d.observe(Ddl("shop", q))
    assert d.of("shop", "u") == {"k": "3", "b": "5", "n": "7", "m": "1"}
    assert d.of("shop", "t") == {}
    d.observe(Ddl("", "DROP DATABASE shop"))
    assert d.of("shop", "u") == {}


def test_row_kinds_are_the_ops() -> None:
    assert {k: dbz._OPS[k] for k in RowKind} == {
        RowKind.INSERT: "c", RowKind.UPDATE: "u", RowKind.DELETE: "d"
    }  # fmt: skip
