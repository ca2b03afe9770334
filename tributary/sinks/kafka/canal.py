"""Row changes <-> TiCDC's canal-json messages (Alibaba Canal's ``FlatMessage`` in JSON).

One message per row change or DDL, written as TiCDC writes it. A row change's fields, in
TiCDC's order: ``id`` (always 0), ``database``, ``table``, ``pkNames`` (the primary key's
columns in column order, ``[]`` without one), ``isDdl`` false, ``type`` (INSERT, UPDATE,
DELETE), ``es`` (the commit time, ms), ``ts`` (the time the message was made, ms), ``sql`` "",
``sqlType`` and ``mysqlType`` (per column, ``canal_types``), ``old`` (a list with the row before
an UPDATE; null for INSERT and for DELETE, as TiCDC since v5.4.0), ``data`` (a list with the
new row, or the deleted one), then ``_tidb`` ``{"commitTs": ts}`` with
``enable-tidb-extension``. A DDL and a watermark keep Canal's order (``... sqlType, mysqlType,
data, old, _tidb``) with ``pkNames``, ``sqlType``, ``mysqlType``, ``data`` and ``old`` null; a
DDL's ``type`` comes from its query (``canal_types.ddl_type``), a watermark's is
``TIDB_WATERMARK`` with ``_tidb`` ``{"watermarkTs": ts}`` and empty ``database`` and ``table``:
every change at or below ts was sent before it.

``old`` holds every column by default (TiCDC's default); only the columns whose value changed
with ``only-output-updated-columns`` or ``content-compatible`` (Canal's own rule), which also
writes ``mysqlType`` in full (``int(11)``, ``decimal(10,2)``) instead of the bare name.

Strings are escaped as Go's JSON writers do: ``<``, ``>``, ``&``, U+2028 and U+2029 as
``\\u003c``-style escapes, control characters other than ``\\n``, ``\\r`` and ``\\t`` as
``\\u00XX``; everything else as UTF-8. Example: the bytes ``00 ff 3c`` of a VARBINARY are
``"\\u0000ÿ\\u003c"``.

``decode`` reads either form back into (kind, ``TableInfo``, values) with values as the sinks
take them, for consumers such as the tests' table rebuilder: an ENUM/SET as its name(s) when
``mysqlType`` lists the members, else as the number (MySQL and MariaDB take an ENUM's index and
a SET's mask on INSERT), a partial ``old`` completed from ``data``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from tributary.change import Ddl, Row, RowChange, RowKind, SqlValue, TableInfo
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka.canal_types import (
    BINARY_NAMES,
    REFUSED,
    ddl_type,
    mysql_type,
    sql_type,
    value_text,
)
from tributary.sinks.kafka.secondary import type_name
from tributary.sinks.port import SinkError
from tributary.tidbcodec.enumset import enum_name, set_names, set_to_str
from tributary.wire.ts import physical_ms

WATERMARK = "TIDB_WATERMARK"
_KINDS = {RowKind.INSERT: "INSERT", RowKind.UPDATE: "UPDATE", RowKind.DELETE: "DELETE"}
_ESCAPE = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')
_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class CanalJsonError(SinkError):
    """A row that cannot be written as canal-json, or a message that is not one."""


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if "\ud800" <= c <= "\udfff":
        return "\\ufffd"  # a lone surrogate: Go writes invalid UTF-8 as U+FFFD
    return _SHORT.get(c) or f"\\u{ord(c):04x}"


def jstr(text: str) -> str:
    """A JSON string as Go's encoders write it (HTML characters escaped)."""
    return '"' + _ESCAPE.sub(_escape, text) + '"'


def _jobject(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{jstr(k)}:{v}" for k, v in pairs) + "}"


@dataclass(frozen=True, slots=True)
class Columns:
    """A table's per-column encoding plan: (name, ColType, type name), the ``mysqlType`` and
    ``pkNames`` JSON (the same for every row), and whether ``old`` keeps changed columns only."""

    plan: tuple[tuple[str, ColType, str], ...]
    pk_json: str
    mysql_types: str
    only_updated: bool = False
    mysql_pairs: tuple[tuple[str, str], ...] = ()  # (column, its mysqlType JSON)

    @classmethod
    def of(
        cls, info: TableInfo, *, compatible: bool = False, only_updated: bool = False
    ) -> Columns:
        plan, types = [], []
        for c in info.columns:
            ct = column_type(c.mysql_type)
            name = type_name(ct)
            if name in REFUSED:
                raise CanalJsonError(
                    f"{info.qualified}.{c.name}: a {c.mysql_type} column has no canal-json form "
                    "(TiCDC has none for geometry types)"
                )
            plan.append((c.name, ct, name))
            types.append((c.name, jstr(mysql_type(ct, name, c.mysql_type, full=compatible))))
        pk = [c.name for c in info.columns if c.is_pk]
        pk_json = "[" + ",".join(map(jstr, pk)) + "]"
        return cls(tuple(plan), pk_json, _jobject(types), only_updated or compatible, tuple(types))

    def row(self, values: Row, skip: Row | None = None, keep: Container[str] | None = None) -> str:
        """``[{...}]`` of the columns present in ``values`` (those equal in ``skip`` left out;
        with ``keep``, only those in it)."""
        pairs = []
        for n, ct, name in self.plan:
            if n not in values or (skip is not None and n in skip and skip[n] == values[n]):
                continue
            if keep is not None and n not in keep:
                continue
            text = value_text(ct, name, values[n])
            pairs.append((n, "null" if text is None else jstr(text)))
        return "[" + _jobject(pairs) + "]"

    def sql_types(self, values: Row, keep: Container[str] | None = None) -> str:
        return _jobject(
            [
                (n, str(sql_type(ct, name, values[n])))
                for n, ct, name in self.plan
                if n in values and (keep is None or n in keep)
            ]
        )

    def mysql_types_of(self, keep: Container[str]) -> str:
        return _jobject([(n, t) for n, t in self.mysql_pairs if n in keep])


def encode_row(
    change: RowChange,
    commit_ts: int,
    cols: Columns,
    *,
    extension: bool,
    claim_check: str | None = None,
) -> bytes:
    """A row change's message; with ``claim_check`` (the location of the whole message in the
    claim-check storage), TiCDC's reference to it: the row's handle key columns alone, and the
    location in ``_tidb.claimCheckLocation``."""
    info, values = change.table, change.values
    keep = None if claim_check is None else frozenset(info.where_columns(values))
    try:
        old = "null"
        if change.old_values is not None:
            old = cols.row(change.old_values, values if cols.only_updated else None, keep)
        parts = [
            '{"id":0,"database":',
            jstr(info.schema),
            ',"table":',
            jstr(info.table),
            ',"pkNames":',
            cols.pk_json,
            ',"isDdl":false,"type":"',
            _KINDS[change.kind],
            f'","es":{physical_ms(commit_ts)},"ts":{int(time.time() * 1000)},"sql":"","sqlType":',
            cols.sql_types(values, keep),
            ',"mysqlType":',
            cols.mysql_types if keep is None else cols.mysql_types_of(keep),
            ',"old":',
            old,
            ',"data":',
            cols.row(values, keep=keep),
        ]
    except (ValueError, TypeError, UnicodeDecodeError, OverflowError) as e:
        raise CanalJsonError(f"txn {commit_ts}: {info.qualified}: cannot write a row: {e}") from e
    if claim_check is not None:
        parts.append(
            f',"_tidb":{{"commitTs":{commit_ts},"claimCheckLocation":{jstr(claim_check)}}}'
        )
    elif extension:
        parts.append(f',"_tidb":{{"commitTs":{commit_ts}}}')
    parts.append("}")
    return "".join(parts).encode()


def _header(
    database: str, table: str, is_ddl: bool, kind: str, ts: int, sql: str, tidb: str | None
) -> bytes:
    text = (
        f'{{"id":0,"database":{jstr(database)},"table":{jstr(table)},"pkNames":null,'
        f'"isDdl":{"true" if is_ddl else "false"},"type":{jstr(kind)},"es":{physical_ms(ts)},'
        f'"ts":{int(time.time() * 1000)},"sql":{jstr(sql)},"sqlType":null,"mysqlType":null,'
        f'"data":null,"old":null'
    )
    return (text + (f',"_tidb":{tidb}' if tidb is not None else "") + "}").encode()


def encode_ddl(ddl: Ddl, commit_ts: int, *, extension: bool) -> bytes:
    tidb = f'{{"commitTs":{commit_ts}}}' if extension else None
    return _header(ddl.schema, ddl.table, True, ddl_type(ddl.query), commit_ts, ddl.query, tidb)


def encode_watermark(ts: int) -> bytes:
    return _header("", "", False, WATERMARK, ts, "", f'{{"watermarkTs":{ts}}}')


# -- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CanalEvent:
    """One decoded message: a row change, a DDL or a watermark, with its commit ts (0 without
    the TiDB extension)."""

    commit_ts: int
    row: RowChange | None = None
    ddl: Ddl | None = None
    watermark: bool = False
    claim_check: str | None = None  # the whole message is there; ``row`` has its key alone


def _value(text: str | None, mysql_type: str) -> SqlValue:
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"a value is {type(text).__name__}, not a string")
    ct = column_type(mysql_type)
    name = type_name(ct)
    if name in ("tinyint", "smallint", "mediumint", "int", "bigint", "bit"):
        return int(text)
    if name == "enum":
        return enum_name(ct.elems, int(text)) if ct.elems else int(text)
    if name == "set":
        return set_to_str(ct.elems, set_names(ct.elems, int(text))) if ct.elems else int(text)
    if name in ("float", "double"):
        return float(text)
    if name in BINARY_NAMES:
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
        claim = tidb.get("claimCheckLocation")
        return CanalEvent(ts, row=_row(msg), claim_check=None if claim is None else str(claim))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise CanalJsonError(f"not a canal-json message ({len(payload)} bytes): {e!r}") from e


def _row(msg: dict[str, Any]) -> RowChange:
    types: dict[str, str] = msg["mysqlType"]
    data: dict[str, str | None] = msg["data"][0]
    names = list(data) + [n for n in types if n not in data]
    info = TableInfo.build(
        msg["database"], msg["table"], [(n, types[n]) for n in names], msg.get("pkNames") or ()
    )
    new = {n: _value(v, types[n]) for n, v in data.items()}
    kind = msg["type"]
    if kind == "UPDATE":
        old = dict(new)  # columns left out of ``old`` did not change
        old.update((n, _value(v, types[n])) for n, v in msg["old"][0].items())
        return RowChange.update(info, old, new)
    if kind == "DELETE":
        return RowChange.delete(info, new)
    if kind == "INSERT":
        return RowChange.insert(info, new)
    raise ValueError(f"unknown type {kind!r}")
