"""Row changes -> TiCDC's avro protocol: Confluent's Avro wire format, keys and values per table.

A message's key and value are each Confluent's framing of an Avro binary body::

    00 | schema id (4 bytes, big-endian) | the record in Avro's binary encoding

The key's record holds the table's handle key columns (the primary key, else the first unique
key of NOT NULL columns); the value's record every column, plus, with
``enable-tidb-extension``, ``_tidb_op`` (``c`` or ``u``), ``_tidb_commit_ts`` and
``_tidb_commit_physical_time`` (ms). Both records are named after the table in the namespace
``<name>.<db>`` (``<name>``: the capture cluster's id, TiCDC's changefeed namespace; names made
Avro-safe by ``avro_types.sanitize``); columns are written as ``avro_types`` says.

An insert or an update is its key and its new row (an update carries no old values, as in
TiCDC); a delete is its key with a null value (Confluent sinks' ``delete.on.null``); an update
that changes the handle key is a delete of the old key and an insert of the new one. A table
without a handle key cannot say which row a delete removes and is refused, as TiCDC refuses it.

Example: ``shop.t (id INT PRIMARY KEY, note VARCHAR(9))``, an insert of ``(7, 'x')`` whose
schemas got ids 3 (key) and 4 (value): key ``00 00000003 0e`` (zigzag 7), value
``00 00000004 0e 02 02 78`` (7; union branch 1, "x" of length 1).
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from tributary.change import RowChange, RowKind, TableInfo
from tributary.sinks.kafka.avro_types import AvroError, Field, Options, field, sanitize
from tributary.sinks.kafka.debezium import handle_key
from tributary.wire.ts import physical_ms

MAGIC = 0
_HEADER = struct.Struct(">bI")
_OPS = {RowKind.INSERT: "c", RowKind.UPDATE: "u"}
EXTENSION_FIELDS: list[dict[str, Any]] = [
    {"name": "_tidb_op", "type": "string", "default": ""},
    {"name": "_tidb_commit_ts", "type": "long", "default": 0},
    {"name": "_tidb_commit_physical_time", "type": "long", "default": 0},
]


def subject_topic(topic: str) -> str:
    """TiCDC's ``sanitizeTopic``: the topic as it names subjects (``.`` -> ``_``)."""
    return topic.replace(".", "_")


def namespace(name: str, schema: str) -> str:
    return f"{sanitize(name)}.{sanitize(schema)}"


@dataclass(frozen=True, slots=True)
class Record:
    """One record schema: its JSON text (what is registered), its parsed form and its fields."""

    text: str
    parsed: Any
    fields: tuple[Field, ...]

    @classmethod
    def of(cls, info: TableInfo, name: str, fields: tuple[Field, ...], extra: list[Any]) -> Record:
        doc = {
            "type": "record",
            "name": sanitize(info.table),
            "namespace": namespace(name, info.schema),
            "fields": [f.schema for f in fields] + extra,
        }
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        try:
            parsed = parse_schema(json.loads(text))
        except Exception as e:  # fastavro raises plain Exceptions for bad schemas
            raise AvroError(f"{info.qualified}: no valid Avro schema: {e}") from e
        return cls(text, parsed, fields)


@dataclass(frozen=True, slots=True)
class TablePlan:
    """A table version's key and value records (the same for every row of that version)."""

    info: TableInfo
    key: Record
    value: Record
    extension: bool

    @classmethod
    def of(
        cls, info: TableInfo, opts: Options, name: str, defaults: dict[str, str] | None = None,
        *, extension: bool = False,
    ) -> TablePlan:  # fmt: skip
        keys = handle_key(info)
        if not keys:
            raise AvroError(
                f"{info.qualified} has no primary key and no unique key of NOT NULL columns: "
                "the avro protocol needs one (a delete is its key alone); leave the table out "
                "of the changefeed's filter or use another protocol"
            )
        defaults = defaults or {}
        fields = tuple(field(c, opts, info.qualified, defaults.get(c.name)) for c in info.columns)
        names = [f.name for f in fields]
        clash = sorted({n for n in names if names.count(n) > 1})
        if clash:
            raise AvroError(f"{info.qualified}: columns with the same Avro name {clash}")
        by_column = {f.column: f for f in fields}
        key_fields = tuple(_required(by_column[c]) for c in keys)
        extra = EXTENSION_FIELDS if extension else []
        key = Record.of(info, name, key_fields, [])
        return cls(info, key, Record.of(info, name, fields, extra), extension)

    def key_body(self, values: Any) -> bytes:
        return _write(self.key, _record(self.key.fields, values))

    def value_body(self, values: Any, kind: RowKind, commit_ts: int) -> bytes:
        record = _record(self.value.fields, values)
        if self.extension:
            record["_tidb_op"] = _OPS[kind]
            record["_tidb_commit_ts"] = commit_ts
            record["_tidb_commit_physical_time"] = physical_ms(commit_ts)
        return _write(self.value, record)


def _required(f: Field) -> Field:
    """A key field: never null (a key column is NOT NULL)."""
    schema = dict(f.schema)
    typ = schema["type"]
    if isinstance(typ, list):
        schema["type"] = next(t for t in typ if t != "null")
        if schema.get("default") is None:
            schema.pop("default", None)
    return Field(f.column, f.name, schema, f.convert)


def _record(fields: tuple[Field, ...], values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        v = values.get(f.column)
        out[f.name] = None if v is None else f.convert(v)
    return out


def _write(record: Record, data: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, record.parsed, data)
    return buf.getvalue()


def frame(schema_id: int, body: bytes) -> bytes:
    """Confluent's wire format: the magic byte, the schema id, the Avro body."""
    return _HEADER.pack(MAGIC, schema_id) + body


def unframe(data: bytes) -> tuple[int, bytes]:
    """(schema id, Avro body) of a message in Confluent's wire format; ValueError otherwise."""
    if len(data) < _HEADER.size:
        raise ValueError(f"{len(data)} bytes: shorter than the 5-byte header")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"magic byte {magic}, not {MAGIC}")
    return schema_id, data[_HEADER.size :]


def read(record: Record, body: bytes) -> dict[str, Any]:
    """The record of an Avro body written with ``record``'s schema (ValueError if it is not)."""
    try:
        out = schemaless_reader(io.BytesIO(body), record.parsed, None)
    except (EOFError, IndexError, KeyError, UnicodeDecodeError, OverflowError, TypeError) as e:
        raise ValueError(f"not a record of {record.parsed.get('name')}: {e!r}") from e
    if not isinstance(out, dict):
        raise ValueError("not a record")
    return out


def row_messages(change: RowChange, plan: TablePlan, commit_ts: int) -> list[tuple[Any, bool]]:
    """The (row, is_delete) messages of a row change, in order: an update that changes the
    handle key is a delete of the old key and an insert of the new row."""
    kind, values, old = change.kind, change.values, change.old_values
    if kind is RowKind.DELETE:
        return [(values, True)]
    if kind is RowKind.UPDATE and old is not None and _key_changed(plan, old, values):
        return [(old, True), (values, False)]
    return [(values, False)]


def _key_changed(plan: TablePlan, old: Any, new: Any) -> bool:
    return any(old.get(f.column) != new.get(f.column) for f in plan.key.fields)


def decode(record: Record, data: bytes) -> tuple[int, dict[str, Any]]:
    """(schema id, record) of a framed message written with ``record``'s schema; AvroError if
    it is not one."""
    try:
        schema_id, body = unframe(data)
        return schema_id, read(record, body)
    except ValueError as e:
        raise AvroError(f"not an avro message: {e}") from e
