"""Row changes <-> TiCDC's canal-json messages (Alibaba Canal's ``FlatMessage`` in JSON).

One message per row change or DDL, its fields in Canal's order: ``id`` (always 0, as TiCDC),
``database``, ``table``, ``pkNames`` (the primary key's columns, null when there is none or for
a DDL), ``isDdl``, ``type`` (INSERT, UPDATE, DELETE; a DDL's kind: CREATE, ERASE, ALTER,
TRUNCATE, RENAME, CINDEX, DINDEX, else QUERY), ``es`` (the commit time, ms), ``ts`` (the time the
message was made, ms), ``sql`` (the DDL's query, "" for rows), ``sqlType`` (each column's
java.sql.Types code), ``mysqlType`` (each column's type as declared), ``data`` (a list with the
row: the new one, or the deleted one), ``old`` (a list with the row before an UPDATE, every
column as TiCDC sends it by default; null otherwise). With ``enable-tidb-extension``, ``_tidb``
carries ``{"commitTs": ts}``, and a watermark message (``type`` ``TIDB_WATERMARK``, ``_tidb``
``{"watermarkTs": ts}``) says every change at or below ts was sent before it.

Values are JSON strings as Canal writes them (null for NULL): integers in decimal, floats as
Python's shortest repr, DECIMAL and temporal values as their MySQL text, binary strings and
BLOBs as ISO-8859-1 text of their bytes (one character per byte, as Java's Canal), BIT as its
unsigned value, ENUM as its 1-based index and SET as its bit mask. ``sqlType`` follows Canal:
an unsigned integer type is promoted to the next wider Java type when its value does not fit
(TINYINT UNSIGNED 200 -> SMALLINT), BIGINT UNSIGNED past 2^63-1 is DECIMAL.

``decode`` reads a message back into (kind, ``TableInfo``, values) with values as the sinks take
them, for consumers such as the tests' table rebuilder.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tributary.change import Ddl, Row, RowChange, RowKind, SqlValue, TableInfo
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka.secondary import type_name
from tributary.sinks.port import SinkError
from tributary.tidbcodec.enumset import enum_index, set_mask
from tributary.wire.ts import physical_ms

WATERMARK = "TIDB_WATERMARK"

# java.sql.Types
BIT, TINYINT, SMALLINT, INTEGER, BIGINT = -7, -6, 5, 4, -5
REAL, DOUBLE, DECIMAL, CHAR, VARCHAR = 7, 8, 3, 1, 12
DATE, TIME, TIMESTAMP, BLOB, CLOB = 91, 92, 93, 2004, 2005

_INTS = {"tinyint": TINYINT, "smallint": SMALLINT, "mediumint": INTEGER, "int": INTEGER}
_WIDER = {TINYINT: SMALLINT, SMALLINT: INTEGER, INTEGER: BIGINT, BIGINT: DECIMAL}
_SIGNED_MAX = {"tinyint": 127, "smallint": 32767, "mediumint": 8388607, "int": 2147483647}
_FIXED = {
    "bigint": BIGINT,
    "float": REAL,
    "double": DOUBLE,
    "decimal": DECIMAL,
    "date": DATE,
    "datetime": TIMESTAMP,
    "timestamp": TIMESTAMP,
    "time": TIME,
    "year": VARCHAR,
    "char": CHAR,
    "varchar": VARCHAR,
    "binary": BLOB,
    "varbinary": BLOB,
    "tinytext": CLOB,
    "text": CLOB,
    "mediumtext": CLOB,
    "longtext": CLOB,
    "tinyblob": BLOB,
    "blob": BLOB,
    "mediumblob": BLOB,
    "longblob": BLOB,
    "enum": INTEGER,
    "set": BIT,
    "bit": BIT,
    "json": VARCHAR,
}
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_DDL_KINDS = (
    (re.compile(r"^\s*create\s+(?:temporary\s+)?table\b", re.I), "CREATE"),
    (re.compile(r"^\s*drop\s+table\b", re.I), "ERASE"),
    (re.compile(r"^\s*alter\s+table\b", re.I), "ALTER"),
    (re.compile(r"^\s*truncate\b", re.I), "TRUNCATE"),
    (re.compile(r"^\s*rename\s+table\b", re.I), "RENAME"),
    (re.compile(r"^\s*create\s+(?:unique\s+|fulltext\s+|spatial\s+)?index\b", re.I), "CINDEX"),
    (re.compile(r"^\s*drop\s+index\b", re.I), "DINDEX"),
)
_KINDS = {RowKind.INSERT: "INSERT", RowKind.UPDATE: "UPDATE", RowKind.DELETE: "DELETE"}


class CanalJsonError(SinkError):
    """A row that cannot be written as canal-json, or a message that is not one."""


def ddl_type(query: str) -> str:
    for pattern, kind in _DDL_KINDS:
        if pattern.match(query):
            return kind
    return "QUERY"


def sql_type(ct: ColType, name: str, value: SqlValue) -> int:
    """Canal's java.sql.Types code of a column, for ``value`` (unsigned types widen)."""
    if name in _INTS:
        code = _INTS[name]
        if ct.unsigned and isinstance(value, int) and value > _SIGNED_MAX[name]:
            return _WIDER[code]
        return code
    if name == "bigint" and ct.unsigned and isinstance(value, int) and value >= 1 << 63:
        return DECIMAL
    return _FIXED.get(name, VARCHAR)


def text_of(ct: ColType, name: str, value: SqlValue) -> str | None:
    """A value as Canal writes it."""
    if value is None:
        return None
    if name == "enum" and not isinstance(value, int):
        value = enum_index(ct.elems, value.decode() if isinstance(value, bytes) else str(value))
    elif name == "set" and not isinstance(value, int):
        value = set_mask(ct.elems, value.decode() if isinstance(value, bytes) else str(value))
    elif name == "bit" and isinstance(value, bytes):
        value = int.from_bytes(value, "big")
    if isinstance(value, bytes):
        return value.decode("latin-1") if name in _BINARY else value.decode("utf-8", "replace")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


@dataclass(frozen=True, slots=True)
class Columns:
    """A table's per-column encoding plan: (name, ColType, type name, declared type)."""

    plan: tuple[tuple[str, ColType, str, str], ...]
    pk_names: list[str] | None

    @classmethod
    def of(cls, info: TableInfo) -> Columns:
        plan = []
        for c in info.columns:
            ct = column_type(c.mysql_type)
            plan.append((c.name, ct, type_name(ct), c.mysql_type.lower()))
        return cls(tuple(plan), list(info.primary_key) or None)

    def row(self, values: Row) -> dict[str, str | None]:
        return {n: text_of(ct, name, values.get(n)) for n, ct, name, _ in self.plan}


def _envelope(
    database: str, table: str, kind: str, commit_ts: int, *, extension: bool, key: str = "commitTs"
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": 0,
        "database": database,
        "table": table,
        "pkNames": None,
        "isDdl": False,
        "type": kind,
        "es": physical_ms(commit_ts),
        "ts": int(time.time() * 1000),
        "sql": "",
        "sqlType": None,
        "mysqlType": None,
        "data": None,
        "old": None,
    }
    if extension:
        out["_tidb"] = {key: commit_ts}
    return out


def encode_row(change: RowChange, commit_ts: int, cols: Columns, *, extension: bool) -> bytes:
    info = change.table
    msg = _envelope(info.schema, info.table, _KINDS[change.kind], commit_ts, extension=extension)
    values = change.values
    try:
        msg["pkNames"] = cols.pk_names
        msg["sqlType"] = {n: sql_type(ct, name, values.get(n)) for n, ct, name, _ in cols.plan}
        msg["mysqlType"] = {n: declared for n, _, _, declared in cols.plan}
        msg["data"] = [cols.row(values)]
        if change.old_values is not None:
            msg["old"] = [cols.row(change.old_values)]
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise CanalJsonError(f"txn {commit_ts}: {info.qualified}: cannot write a row: {e}") from e
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()


def encode_ddl(ddl: Ddl, commit_ts: int, *, extension: bool) -> bytes:
    msg = _envelope(ddl.schema, ddl.table, ddl_type(ddl.query), commit_ts, extension=extension)
    msg["isDdl"] = True
    msg["sql"] = ddl.query
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()


def encode_watermark(ts: int) -> bytes:
    msg = _envelope("", "", WATERMARK, ts, extension=True, key="watermarkTs")
    return json.dumps(msg, separators=(",", ":")).encode()


# -- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CanalEvent:
    """One decoded message: a row change, a DDL or a watermark, with its commit ts (0 without
    the TiDB extension)."""

    commit_ts: int
    row: RowChange | None = None
    ddl: Ddl | None = None
    watermark: bool = False


def _value(text: str | None, mysql_type: str) -> SqlValue:
    if text is None:
        return None
    ct = column_type(mysql_type)
    name = type_name(ct)
    if name in _INTS or name in ("bigint", "bit", "enum", "set"):
        return int(text)
    if name in ("float", "double"):
        return float(text)
    if name in _BINARY:
        return text.encode("latin-1")
    return text


def decode(payload: bytes) -> CanalEvent:
    try:
        msg = json.loads(payload)
        tidb = msg.get("_tidb") or {}
        if msg["type"] == WATERMARK:
            return CanalEvent(int(tidb["watermarkTs"]), watermark=True)
        ts = int(tidb.get("commitTs", 0))
        if msg["isDdl"]:
            return CanalEvent(ts, ddl=Ddl(msg["database"], msg["sql"], msg["table"]))
        types: dict[str, str] = msg["mysqlType"]
        info = TableInfo.build(
            msg["database"], msg["table"], list(types.items()), msg.get("pkNames") or ()
        )
        new = {n: _value(v, types[n]) for n, v in msg["data"][0].items()}
        kind = msg["type"]
        if kind == "UPDATE":
            old = {n: _value(v, types[n]) for n, v in msg["old"][0].items()}
            return CanalEvent(ts, row=RowChange.update(info, old, new))
        if kind == "DELETE":
            return CanalEvent(ts, row=RowChange.delete(info, new))
        return CanalEvent(ts, row=RowChange.insert(info, new))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise CanalJsonError(f"not a canal-json message ({len(payload)} bytes): {e!r}") from e
