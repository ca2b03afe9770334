"""The fixed parts of the debezium protocol's Kafka Connect schemas, as JSON text.

The source block (``io.debezium.connector.mysql.Source``, TiCDC's fields and its
``commit_ts``/``cluster_id``), the envelope's ``op``, ``ts_ms`` and ``transaction`` fields, the
schema change key and value of a DDL, and the names: ``<name>.<db>.<table>`` with every
character outside ``[A-Za-z0-9_]`` replaced by ``_`` (TiCDC's ``SanitizeName``; Avro's rule).
"""

from __future__ import annotations

import json
import re
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _sanitize(part: str) -> str:
    out = _UNSAFE.sub("_", part)
    return "_" + out if out[:1].isdigit() else out


def schema_name(name: str, db: str, table: str) -> str:
    """``<name>.<db>.<table>`` for schema names (``<name>.<db>`` without a table)."""
    parts = [_sanitize(p) for p in (name, db, table) if p]
    return ".".join(parts)


def _f(kind: str, field: str, optional: bool, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, **extra, "field": field}


def _text(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


SOURCE = {
    "type": "struct",
    "fields": [
        _f("string", "version", False),
        _f("string", "connector", False),
        _f("string", "name", False),
        _f("int64", "ts_ms", False),
        _f(
            "string",
            "snapshot",
            True,
            name="io.debezium.data.Enum",
            version=1,
            parameters={"allowed": "true,last,false,incremental"},
            default="false",
        ),
        _f("string", "db", False),
        _f("string", "sequence", True),
        _f("string", "table", True),
        _f("int64", "server_id", False),
        _f("string", "gtid", True),
        _f("string", "file", False),
        _f("int64", "pos", False),
        _f("int32", "row", False),
        _f("int64", "thread", True),
        _f("string", "query", True),
        _f("int64", "commit_ts", False),
        _f("string", "cluster_id", False),
    ],
    "optional": False,
    "name": "io.debezium.connector.mysql.Source",
    "field": "source",
}
_TRANSACTION = {
    "type": "struct",
    "fields": [
        _f("string", "id", False),
        _f("int64", "total_order", False),
        _f("int64", "data_collection_order", False),
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}
_OP_TS_TX = [_f("string", "op", False), _f("int64", "ts_ms", True), _TRANSACTION]

# After the envelope's before/after: source, op, ts_ms, transaction.
ENVELOPE_TAIL = ",".join(_text(f) for f in [SOURCE, *_OP_TS_TX])
WATERMARK_SCHEMA_FIELDS = ENVELOPE_TAIL

SCHEMA_CHANGE_KEY = _text(
    {
        "type": "struct",
        "name": "io.debezium.connector.mysql.SchemaChangeKey",
        "optional": False,
        "version": 1,
        "fields": [_f("string", "databaseName", False)],
    }
)


def _column() -> dict[str, Any]:
    names = (
        ("name", "string", False), ("jdbcType", "int32", False), ("nativeType", "int32", True),
        ("typeName", "string", False), ("typeExpression", "string", True),
        ("charsetName", "string", True), ("length", "int32", True), ("scale", "int32", True),
        ("position", "int32", False), ("optional", "boolean", True),
        ("autoIncremented", "boolean", True), ("generated", "boolean", True),
        ("comment", "string", True), ("defaultValueExpression", "string", True),
    )  # fmt: skip
    fields = [_f(kind, n, opt) for n, kind, opt in names]
    fields.append(_f("array", "enumValues", True, items={"type": "string", "optional": False}))
    return {
        "name": "io.debezium.connector.schema.Column", "optional": False, "type": "struct",
        "version": 1, "fields": fields,
    }  # fmt: skip


_TABLE = _f(
    "struct", "table", True, name="io.debezium.connector.schema.Table", version=1,
    fields=[
        _f("string", "defaultCharsetName", True),
        _f("array", "primaryKeyColumnNames", True, items={"type": "string", "optional": False}),
        _f("array", "columns", False, items=_column()),
        _f("string", "comment", True),
    ],
)  # fmt: skip
_CHANGE = {
    "name": "io.debezium.connector.schema.Change",
    "optional": False,
    "type": "struct",
    "version": 1,
    "fields": [_f("string", "type", False), _f("string", "id", False), _TABLE],
}
SCHEMA_CHANGE_VALUE = _text(
    {
        "optional": False,
        "type": "struct",
        "version": 1,
        "name": "io.debezium.connector.mysql.SchemaChangeValue",
        "fields": [
            SOURCE,
            _f("int64", "ts_ms", False),
            _f("string", "databaseName", True),
            _f("string", "schemaName", True),
            _f("string", "ddl", True),
            _f("array", "tableChanges", False, items=_CHANGE),
        ],
    }
)
