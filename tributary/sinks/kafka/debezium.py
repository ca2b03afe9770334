"""Row changes and DDLs <-> TiCDC's debezium protocol: Debezium's change event envelope in JSON.

A row change's key and value are each ``{"payload": ..., "schema": ...}`` as Kafka Connect's
JSON converter reads them with schemas enabled (``debezium-disable-schema``: the payload alone,
as TiCDC does). The key's payload holds the handle key columns (the primary key, else the first
unique key of NOT NULL columns; a table with neither has a null key, as in Debezium), its
schema is ``<name>.<db>.<table>.Key``. The value's payload, in TiCDC's order::

    {"source": {"version": "2.4.0.Final", "connector": "TiCDC", "name": <name>,
                "ts_ms": <commit time>, "snapshot": "false", "db", "table", "server_id": 0,
                "gtid": null, "file": "", "pos": 0, "row": 0, "thread": 0, "query": null,
                "commit_ts": <ts>, "cluster_id": <name>},
     "ts_ms": <now>, "transaction": null, "op": "c" | "u" | "d", "before", "after"}

``before`` is null for ``c``, ``after`` null for ``d``; an update's ``before`` is left out with
``debezium-output-old-value=false``. The value's schema is ``<name>.<db>.<table>.Envelope``
with the ``before``/``after`` structs (``<...>.Value``, columns as ``debezium_types`` writes
them), ``io.debezium.connector.mysql.Source`` (with ``commit_ts`` and ``cluster_id``, which
TiCDC writes but leaves out of its schema, so a Connect converter dropped them), ``op``,
``ts_ms`` and ``transaction``. ``<name>`` is the capture cluster's id (TiCDC's cluster id).

A DDL is TiCDC's (v9) schema change event, Debezium's MySQL connector's form: the key
``io.debezium.connector.mysql.SchemaChangeKey`` ``{"databaseName"}``, the value
``io.debezium.connector.mysql.SchemaChangeValue`` ``{source, ts_ms, databaseName, schemaName:
null, ddl, tableChanges}``, one change ``{type: CREATE | ALTER | DROP, id: "db"."t", table:
null}`` (TiCDC describes the table after the change; a binlog reader learns a table's columns
from the rows that follow, not from the DDL, so ``table`` is null here). With
``enable-tidb-extension`` a watermark is an event with ``op`` ``m`` and an empty key struct.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from tributary.change import Ddl, RowChange, RowKind, TableInfo
from tributary.sinks.kafka.canal import jstr
from tributary.sinks.kafka.canal_types import ddl_type
from tributary.sinks.kafka.debezium_schema import (
    ENVELOPE_TAIL,
    SCHEMA_CHANGE_KEY,
    SCHEMA_CHANGE_VALUE,
    WATERMARK_SCHEMA_FIELDS,
    schema_name,
)
from tributary.sinks.kafka.debezium_types import DebeziumError, Field, Options, field
from tributary.wire.ts import physical_ms

_OPS = {RowKind.INSERT: "c", RowKind.UPDATE: "u", RowKind.DELETE: "d"}
_DDL_CHANGES = {
    "CREATE": "CREATE",
    "ALTER": "ALTER",
    "RENAME": "ALTER",
    "CINDEX": "ALTER",
    "ERASE": "DROP",
    "DINDEX": "DROP",
    "TRUNCATE": "DROP",
}


@dataclass(frozen=True, slots=True)
class TablePlan:
    """A table's fields, handle key and schema texts (the same for every row of its version)."""

    info: TableInfo
    fields: tuple[Field, ...]
    key: tuple[Field, ...]  # () when the table has no handle key: a null message key
    key_schema: str
    value_schema: str

    @classmethod
    def of(
        cls, info: TableInfo, opts: Options, name: str, defaults: dict[str, str] | None = None
    ) -> TablePlan:
        defaults = defaults or {}
        fields = tuple(field(c, opts, info.qualified, defaults.get(c.name)) for c in info.columns)
        by_name = {f.name: f for f in fields}
        key = tuple(by_name[c] for c in handle_key(info))
        prefix = schema_name(name, info.schema, info.table)
        cols = ",".join(f.schema for f in fields)
        key_schema = (
            f'{{"type":"struct","optional":false,"name":{jstr(prefix + ".Key")},"fields":['
            + ",".join(f.schema for f in key)
            + "]}"
        )
        row = f'{{"type":"struct","optional":true,"name":{jstr(prefix + ".Value")},'
        value_schema = (
            f'{{"type":"struct","optional":false,"name":{jstr(prefix + ".Envelope")},'
            f'"version":1,"fields":[{row}"field":"before","fields":[{cols}]}},'
            f'{row}"field":"after","fields":[{cols}]}},{ENVELOPE_TAIL}]}}'
        )
        return cls(info, fields, key, key_schema, value_schema)

    def row(self, values: Any) -> str:
        parts = []
        for f in self.fields:
            if f.name not in values:
                continue
            v = values[f.name]
            parts.append(f"{jstr(f.name)}:{'null' if v is None else f.encode(v)}")
        return "{" + ",".join(parts) + "}"

    def key_payload(self, values: Any) -> str:
        parts = [
            f"{jstr(f.name)}:{'null' if values.get(f.name) is None else f.encode(values[f.name])}"
            for f in self.key
        ]
        return "{" + ",".join(parts) + "}"


def handle_key(info: TableInfo) -> tuple[str, ...]:
    """TiCDC's handle key: the primary key, else the first unique key of NOT NULL columns."""
    if info.primary_key:
        return info.primary_key
    for uk in info.unique_keys:
        if not any(info.column(c).nullable for c in uk.columns):
            return uk.columns
    return ()


def _wrap(payload: str, schema: str | None) -> bytes:
    if schema is None:
        return f'{{"payload":{payload}}}'.encode()
    return f'{{"payload":{payload},"schema":{schema}}}'.encode()


def source(name: str, db: str, table: str, commit_ts: int) -> str:
    return (
        f'{{"version":"2.4.0.Final","connector":"TiCDC","name":{jstr(name)},'
        f'"ts_ms":{physical_ms(commit_ts)},"snapshot":"false","db":{jstr(db)},'
        f'"table":{jstr(table)},"server_id":0,"gtid":null,"file":"","pos":0,"row":0,'
        f'"thread":0,"query":null,"commit_ts":{commit_ts},"cluster_id":{jstr(name)}}}'
    )


def encode_key(plan: TablePlan, values: Any, *, with_schema: bool) -> bytes | None:
    if not plan.key:
        return None
    return _wrap(plan.key_payload(values), plan.key_schema if with_schema else None)


def encode_row(
    plan: TablePlan,
    kind: RowKind,
    before: Any,
    after: Any,
    commit_ts: int,
    name: str,
    *,
    with_schema: bool,
    old_value: bool = True,
) -> bytes:
    """The value of a row change (``before``/``after`` as the op has them, None otherwise)."""
    info = plan.info
    try:
        parts = [
            f'{{"source":{source(name, info.schema, info.table, commit_ts)},'
            f'"ts_ms":{int(time.time() * 1000)},"transaction":null,"op":"{_OPS[kind]}"'
        ]
        if kind is RowKind.INSERT:
            parts.append(f',"before":null,"after":{plan.row(after)}')
        elif kind is RowKind.DELETE:
            parts.append(f',"after":null,"before":{plan.row(before)}')
        else:
            if old_value:
                parts.append(f',"before":{plan.row(before)}')
            parts.append(f',"after":{plan.row(after)}')
    except (ValueError, TypeError, ArithmeticError, UnicodeDecodeError) as e:
        raise DebeziumError(f"txn {commit_ts}: {info.qualified}: cannot write a row: {e}") from e
    parts.append("}")
    return _wrap("".join(parts), plan.value_schema if with_schema else None)


def ddl_change(query: str) -> str | None:
    """CREATE, ALTER or DROP as TiCDC names a DDL's change; None for a DDL it does not send."""
    kind = ddl_type(query)
    if kind == "QUERY":
        head = query.lstrip().upper().split(None, 2)
        if len(head) >= 2 and head[1] in ("DATABASE", "SCHEMA"):
            return {"CREATE": "CREATE", "DROP": "DROP", "ALTER": "ALTER"}.get(head[0])
        return None
    return _DDL_CHANGES.get(kind)


def encode_ddl(ddl: Ddl, commit_ts: int, name: str, *, with_schema: bool) -> tuple[bytes, bytes]:
    change = ddl_change(ddl.query) or "ALTER"
    db = ddl.schema
    key = _wrap(f'{{"databaseName":{jstr(db)}}}', SCHEMA_CHANGE_KEY if with_schema else None)
    changes = ""
    if ddl.table and ddl_type(ddl.query) != "TRUNCATE":
        table_id = json.dumps(f'"{db}"."{ddl.table}"', ensure_ascii=False)
        changes = f'{{"type":"{change}","id":{table_id},"table":null}}'
    payload = (
        f'{{"source":{source(name, db, ddl.table, commit_ts)},"ts_ms":{int(time.time() * 1000)},'
        f'"databaseName":{jstr(db)},"schemaName":null,"ddl":{jstr(ddl.query)},'
        f'"tableChanges":[{changes}]}}'
    )
    return key, _wrap(payload, SCHEMA_CHANGE_VALUE if with_schema else None)


def encode_watermark(ts: int, name: str, *, with_schema: bool) -> tuple[bytes, bytes]:
    prefix = schema_name(name, "watermark", "")
    key_schema = f'{{"type":"struct","name":{jstr(prefix + ".Key")},"optional":false,"fields":[]}}'
    value_schema = (
        f'{{"type":"struct","optional":false,"name":{jstr(prefix + ".Envelope")},"version":1,'
        f'"fields":[{WATERMARK_SCHEMA_FIELDS}]}}'
    )
    payload = (
        f'{{"source":{source(name, "", "", ts)},"ts_ms":{int(time.time() * 1000)},'
        '"transaction":null,"op":"m"}'
    )
    key = _wrap("{}", key_schema if with_schema else None)
    return key, _wrap(payload, value_schema if with_schema else None)


def row_messages(
    change: RowChange, plan: TablePlan, commit_ts: int, name: str, *, with_schema: bool,
    old_value: bool, tombstones: bool,
) -> list[tuple[bytes | None, bytes | None, Any]]:  # fmt: skip
    """The (key, value, row) messages of a row change, in order (``row``: the values the key
    comes from). An update that changes the handle
    key is a delete of the old key (then its tombstone) and a create of the new one, as
    Debezium's MySQL connector writes it (and TiCDC splits such updates for Kafka)."""
    kind, values, old = change.kind, change.values, change.old_values
    out: list[tuple[bytes | None, bytes | None, Any]] = []

    def one(kind: RowKind, before: Any, after: Any) -> None:
        row = after if after is not None else before
        key = encode_key(plan, row, with_schema=with_schema)
        value = encode_row(
            plan, kind, before, after, commit_ts, name, with_schema=with_schema,
            old_value=old_value,
        )  # fmt: skip
        out.append((key, value, row))
        if kind is RowKind.DELETE and tombstones and key is not None:
            out.append((key, None, row))

    if kind is RowKind.UPDATE and old is not None and plan.key and _key_changed(plan, old, values):
        one(RowKind.DELETE, old, None)
        one(RowKind.INSERT, None, values)
    elif kind is RowKind.INSERT:
        one(kind, None, values)
    elif kind is RowKind.DELETE:
        one(kind, values, None)
    else:
        one(kind, old, values)
    return out


def _key_changed(plan: TablePlan, old: Any, new: Any) -> bool:
    return any(old.get(f.name) != new.get(f.name) for f in plan.key)
