"""The avro protocol's messages: every column type's Avro schema and value (read back with
fastavro), Confluent's framing, keys and handle-key updates, deletes as null values, the TiDB
extension fields, names made Avro-safe, defaults from DDL, refusals, and the URL options."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import pytest

from tributary.change import RowChange, RowKind, SqlValue, TableInfo
from tributary.sinks.kafka import avro
from tributary.sinks.kafka.avro_sink import AvroSettings
from tributary.sinks.kafka.avro_types import AvroError, Options, sanitize
from tributary.sinks.kafka.cdc_base import parse_url
from tributary.sinks.port import SinkError
from tributary.sinks.urls import redact
from tributary.wire.ts import compose, physical_ms

TS = compose(1_795_255_200_000, 3)


def _plan(info: TableInfo, opts: Options | None = None, **kw: Any) -> avro.TablePlan:
    defaults = kw.pop("defaults", None)
    return avro.TablePlan.of(info, opts or Options(), "default", defaults, **kw)


def _one(mysql_type: str, value: SqlValue, opts: Options | None = None) -> tuple[Any, Any]:
    info = TableInfo.build("db", "t", [("id", "int"), ("c", mysql_type)], ["id"])
    plan = _plan(info, opts)
    body = plan.value_body({"id": 1, "c": value}, RowKind.INSERT, TS)
    schema = json.loads(plan.value.text)["fields"][1]
    return schema, avro.read(plan.value, body)["c"]


@pytest.mark.parametrize(
    ("mysql_type", "value", "avro_type", "tidb_type", "out"),
    [
        ("tinyint", -5, "int", "INT", -5),
        ("tinyint unsigned", 255, "int", "INT UNSIGNED", 255),
        ("mediumint unsigned", 16777215, "int", "INT UNSIGNED", 16777215),
        ("int", -(2**31), "int", "INT", -(2**31)),
        ("int unsigned", 2**32 - 1, "long", "INT UNSIGNED", 2**32 - 1),
        ("bigint", -(2**63), "long", "BIGINT", -(2**63)),
        ("bigint unsigned", 2**63 - 1, "long", "BIGINT UNSIGNED", 2**63 - 1),
        ("float", 1.5, "float", "FLOAT", 1.5),
        ("double", 0.1, "double", "DOUBLE", 0.1),
        ("varchar(9)", "héllo", "string", "TEXT", "héllo"),
        ("text", b"bytes as text", "string", "TEXT", "bytes as text"),
        ("varbinary(9)", b"\x00\xff", "bytes", "BLOB", b"\x00\xff"),
        ("blob", b"\x01", "bytes", "BLOB", b"\x01"),
        ("date", "0000-00-00", "string", "DATE", "0000-00-00"),
        ("datetime(6)", "2026-11-21 10:00:00.500000", "string", "DATETIME",
         "2026-11-21 10:00:00.500000"),
        ("timestamp", "2026-11-21 10:00:00", "string", "TIMESTAMP", "2026-11-21 10:00:00"),
        ("time(3)", "-838:59:59.000", "string", "TIME", "-838:59:59.000"),
        ("year", 2026, "int", "YEAR", 2026),
        ("json", '{"a": [1]}', "string", "JSON", '{"a": [1]}'),
        ("enum('a','b')", 2, "string", "ENUM", "b"),
        ("set('a','b','c')", 5, "string", "SET", "a,c"),
        ("bit(12)", 0x0ABC, "bytes", "BIT", b"\x0a\xbc"),
        ("bit(12)", 0, "bytes", "BIT", b"\x00"),
    ],
)  # fmt: skip
def test_column_types(
    mysql_type: str, value: SqlValue, avro_type: str, tidb_type: str, out: Any
) -> None:
    schema, got = _one(mysql_type, value)
    null, typ = schema["type"]
    assert null == "null" and schema["default"] is None
    assert typ["type"] == avro_type
    assert typ["connect.parameters"]["tidb_type"] == tidb_type
    assert got == out


def test_enum_set_and_bit_parameters() -> None:
    schema, _ = _one("set('a,b','c')", "c")
    assert schema["type"][1]["connect.parameters"]["allowed"] == "a\\,b,c"
    schema, _ = _one("bit(64)", 1)
    assert schema["type"][1]["connect.parameters"]["length"] == "64"


def test_decimal_precise_is_exact_and_string_on_request() -> None:
    schema, got = _one("decimal(65,30)", Decimal("12345678901234567890123456789012345.1"))
    typ = schema["type"][1]
    assert (typ["type"], typ["logicalType"], typ["precision"], typ["scale"]) == (
        "bytes", "decimal", 65, 30,
    )  # fmt: skip
    assert got == Decimal("12345678901234567890123456789012345.1")
    assert got.as_tuple().exponent == -30
    schema, got = _one("decimal(10,2)", Decimal("-1.50"), Options(decimal="string"))
    assert schema["type"][1]["type"] == "string" and got == "-1.50"
    with pytest.raises(ValueError, match="more than 2 digits"):
        _one("decimal(10,2)", Decimal("1.005"))


def test_bigint_unsigned_long_refuses_what_does_not_fit_and_string_carries_it() -> None:
    with pytest.raises(ValueError, match="avro-bigint-unsigned-handling-mode=string"):
        _one("bigint unsigned", 2**64 - 1)
    schema, got = _one("bigint unsigned", 2**64 - 1, Options(unsigned_bigint="string"))
    assert schema["type"][1]["type"] == "string" and got == str(2**64 - 1)


def test_geometry_and_text_that_is_not_utf8_are_refused() -> None:
    with pytest.raises(AvroError, match="no avro form"):
        _one("geometry", b"\x00")
    with pytest.raises(UnicodeDecodeError):
        _one("varchar(3)", b"\xff")


def test_records_names_keys_and_not_null_columns() -> None:
    info = TableInfo.build(
        "my-db", "1t", [("id", "bigint"), ("a b", "int"), ("n", "int")], ["id"], not_null=["n"]
    )
    plan = _plan(info)
    key = json.loads(plan.key.text)
    value = json.loads(plan.value.text)
    assert (key["name"], key["namespace"]) == ("_1t", "default.my_db")
    assert key["fields"] == [
        {"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}}
    ]
    assert [f["name"] for f in value["fields"]] == ["id", "a_b", "n"]
    assert value["fields"][2]["type"]["type"] == "int"  # NOT NULL: no union
    assert sanitize("9a.b") == "_9a_b"
    clash = TableInfo.build("db", "t", [("id", "int"), ("a b", "int"), ("a-b", "int")], ["id"])
    with pytest.raises(AvroError, match="same Avro name"):
        _plan(clash)


def test_a_table_without_a_handle_key_is_refused() -> None:
    info = TableInfo.build("db", "t", [("a", "int")])
    with pytest.raises(AvroError, match="no primary key"):
        _plan(info)
    uk = TableInfo.build("db", "t", [("a", "int"), ("b", "int")], [], {"u": ["a"]}, ["a"])
    assert [f.name for f in _plan(uk).key.fields] == ["a"]


def test_defaults_from_ddl_go_into_the_value_schema() -> None:
    info = TableInfo.build(
        "db", "t", [("id", "int"), ("n", "int"), ("s", "varchar(9)"), ("d", "decimal(5,2)")],
        ["id"], not_null=["n"],
    )  # fmt: skip
    plan = _plan(info, defaults={"n": "7", "s": "new", "d": "1.00"})
    fields = {f["name"]: f for f in json.loads(plan.value.text)["fields"]}
    assert fields["n"]["default"] == 7 and fields["n"]["type"]["type"] == "int"
    assert fields["s"]["type"][1] == "null" and fields["s"]["default"] == "new"
    assert fields["d"]["default"] is None  # no default for a logical type, as TiCDC


def test_framing_and_messages_of_each_change() -> None:
    info = TableInfo.build("shop", "t", [("id", "int"), ("note", "varchar(9)")], ["id"])
    plan = _plan(info, extension=True)
    assert avro.frame(3, plan.key_body({"id": 7})) == b"\x00\x00\x00\x00\x03\x0e"
    assert avro.unframe(b"\x00\x00\x00\x00\x04\x0e") == (4, b"\x0e")
    for bad in (b"", b"\x00\x00", b"\x01\x00\x00\x00\x01"):
        with pytest.raises(ValueError):
            avro.unframe(bad)
    value = avro.read(plan.value, plan.value_body({"id": 7, "note": "x"}, RowKind.UPDATE, TS))
    assert value == {
        "id": 7, "note": "x", "_tidb_op": "u", "_tidb_commit_ts": TS,
        "_tidb_commit_physical_time": physical_ms(TS),
    }  # fmt: skip
    insert = RowChange.insert(info, {"id": 1, "note": "a"})
    assert avro.row_messages(insert, plan, TS) == [({"id": 1, "note": "a"}, False)]
    delete = RowChange(RowKind.DELETE, info, {"id": 1, "note": "a"})
    assert avro.row_messages(delete, plan, TS) == [({"id": 1, "note": "a"}, True)]
    same_key = RowChange(RowKind.UPDATE, info, {"id": 1, "note": "b"}, {"id": 1, "note": "a"})
    assert avro.row_messages(same_key, plan, TS) == [({"id": 1, "note": "b"}, False)]
    moved = RowChange(RowKind.UPDATE, info, {"id": 2, "note": "b"}, {"id": 1, "note": "a"})
    assert avro.row_messages(moved, plan, TS) == [
        ({"id": 1, "note": "a"}, True), ({"id": 2, "note": "b"}, False),
    ]  # fmt: skip


def _settings(query: str) -> AvroSettings:
    url = urlsplit(f"kafka://127.0.0.1:9092/t?protocol=avro&{query}")
    from urllib.parse import parse_qsl

    rest = urlsplit(url.geturl().replace("protocol=avro&", ""))
    return AvroSettings(dict(parse_qsl(rest.query)), parse_url(rest, "avro"))


def test_url_options() -> None:
    ok = "schema-registry=http://127.0.0.1:8081&topic-rule=cdc_{schema}_{table}"
    s = _settings(
        ok + "&avro-decimal-handling-mode=string&avro-bigint-unsigned-handling-mode=string"
    )
    assert s.options == Options("string", "string")
    assert _settings(ok).options == Options()
    with pytest.raises(SinkError, match="schema-registry=http://HOST:PORT is required"):
        _settings("topic-rule={schema}_{table}")
    with pytest.raises(SinkError, match="topic-rule must hold"):
        _settings("schema-registry=http://h:1&topic-rule={table}")
    with pytest.raises(SinkError, match="http:// or https://"):
        _settings("schema-registry=ftp://h:1&topic-rule={schema}_{table}")
    with pytest.raises(SinkError, match="avro-decimal-handling-mode must be one of"):
        _settings(ok + "&avro-decimal-handling-mode=double")
    with pytest.raises(SinkError, match="unknown options"):
        _settings(ok + "&debezium-disable-schema=true")


def test_the_registry_password_is_masked() -> None:
    url = "kafka://b:9/t?protocol=avro&schema-registry=http%3A%2F%2Fu%3Asecret%40h%3A8081"
    shown = redact(url)
    assert "secret" not in shown and "u:******@h:8081" in shown


def test_confluents_avro_deserializer_reads_every_column_type_back() -> None:
    """confluent-kafka's own AvroDeserializer reads the framed key and value; the schema ids come
    from confluent-kafka's in-process registry client (``mock://``; the registry server itself
    is not part of this test)."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    cols = [
        ("id", "bigint unsigned"), ("d", "decimal(20,4)"), ("s", "varchar(9)"),
        ("b", "varbinary(4)"), ("e", "enum('x','y')"), ("t", "datetime(3)"), ("f", "float"),
        ("bits", "bit(9)"), ("n", "int"),
    ]  # fmt: skip
    info = TableInfo.build("shop", "orders", cols, ["id"], not_null=["d"])
    plan = _plan(info, extension=True, defaults={"n": "3"})
    client = SchemaRegistryClient.new_client({"url": "mock://avro-unit"})
    key_id = client.register_schema("cdc_shop_orders-key", Schema(plan.key.text, "AVRO"))
    value_id = client.register_schema("cdc_shop_orders-value", Schema(plan.value.text, "AVRO"))
    row = {
        "id": 2**63 - 1, "d": Decimal("-12.5000"), "s": "ß", "b": b"\x00\x01", "e": 2,
        "t": "2026-01-02 03:04:05.678", "f": 0.25, "bits": 257, "n": None,
    }  # fmt: skip
    key = avro.frame(key_id, plan.key_body(row))
    value = avro.frame(value_id, plan.value_body(row, RowKind.INSERT, TS))
    read = AvroDeserializer(client)
    topic = "cdc_shop_orders"
    assert read(key, SerializationContext(topic, MessageField.KEY)) == {"id": 2**63 - 1}
    got = read(value, SerializationContext(topic, MessageField.VALUE))
    assert got == {
        **row, "e": "y", "bits": b"\x01\x01", "_tidb_op": "c", "_tidb_commit_ts": TS,
        "_tidb_commit_physical_time": physical_ms(TS),
    }  # fmt: skip
