"""Row changes <-> TiCDC's Open Protocol (``protocol=open-protocol``), byte for byte as TiCDC.

A Kafka message holds one or more events. Its key is the protocol version (1) then, per event,
the event key's length and the event key; its value is, per event, the event value's length and
the event value (lengths and version big-endian int64). Example, two rows::

    key   = 00..01 | len(k1) k1 | len(k2) k2        value = len(v1) v1 | len(v2) v2

Event keys are JSON with Go's field order and ``omitempty``: ``{"ts":COMMIT_TS,"scm":SCHEMA,
"tbl":TABLE,"t":TYPE}`` (``t`` 1 row, 2 DDL, 3 resolved; a resolved key is ``{"ts":TS,"t":3}``
and its value empty); ``"ohk":true`` marks a value holding only the handle key columns and
``"ccl":LOCATION`` a claim check (the whole message is in the file at LOCATION).

A row value is ``{"u":{...}}`` (insert), ``{"u":{...},"p":{...}}`` (update: new and previous
values) or ``{"d":{...}}`` (delete), each a map from column name (in name order, as Go writes a
map) to ``{"t":TYPE,"h":true,"f":FLAGS,"v":VALUE}``: TYPE is TiDB's type byte (1 TINYINT, 2
SMALLINT, 3 INT, 4 FLOAT, 5 DOUBLE, 7 TIMESTAMP, 8 BIGINT, 9 MEDIUMINT, 10 DATE, 11 TIME, 12
DATETIME, 13 YEAR, 15 VARCHAR/VARBINARY, 16 BIT, 245 JSON, 246 DECIMAL, 247 ENUM, 248 SET,
249-252 TEXT/BLOB, 254 CHAR/BINARY), ``h`` is present on handle key columns only, FLAGS has
0x01 binary (charset binary: binary strings, BLOBs, numbers, temporal types and JSON, as TiDB
sets it), 0x02 handle key, 0x08 primary key, 0x10 unique key, 0x20 in a multi-column key,
0x80 unsigned (0x04 generated and 0x40 nullable are not set: the change model does not carry
them). VALUE: integers, BIT, ENUM (1-based index), SET (bit mask) and YEAR as JSON numbers,
FLOAT and DOUBLE as numbers (FLOAT with float32's shortest digits), DECIMAL and temporal values
as strings, VARCHAR/CHAR as text, VARBINARY/BINARY as Go's ``strconv.Quote`` of the bytes without
the quotes (``\\x89PNG\\r\\n``), TEXT/BLOB as base64 of the bytes, JSON as its text.

A DDL value is ``{"q":QUERY,"t":ACTION}`` with TiDB's DDL action type (3 create table, 5 add
column, ...; 0 when the query is not recognized).

``decode`` reads messages back (for consumers such as the tests' rebuilder).
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tributary.change import Ddl, Row, RowChange, RowKind, SqlValue, TableInfo
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.port import SinkError
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.enumset import enum_index, set_mask

VERSION = 1
ROW, DDL, RESOLVED = 1, 2, 3
BINARY, HANDLE_KEY, GENERATED, PRIMARY_KEY = 0x01, 0x02, 0x04, 0x08
UNIQUE_KEY, MULTIPLE_KEY, NULLABLE, UNSIGNED = 0x10, 0x20, 0x40, 0x80
HEAD = struct.Struct(">q")
VERSION_HEAD = HEAD.pack(VERSION)
RECORD_OVERHEAD = 5 * 5 + 10 + 1  # TiCDC's MaxRecordOverhead, counted in a message's length

_INTS = frozenset({mt.TYPE_TINY, mt.TYPE_SHORT, mt.TYPE_INT24, mt.TYPE_LONG, mt.TYPE_LONGLONG})
_BLOBS = frozenset({mt.TYPE_TINY_BLOB, mt.TYPE_BLOB, mt.TYPE_MEDIUM_BLOB, mt.TYPE_LONG_BLOB})
_STRINGS = frozenset({mt.TYPE_VARCHAR, mt.TYPE_VAR_STRING, mt.TYPE_STRING})
_TEXT_CHARSET = _BLOBS | _STRINGS | {mt.TYPE_ENUM, mt.TYPE_SET}
_FLOAT32 = struct.Struct("<f")


class OpenProtocolError(SinkError):
    """A row that cannot be written in Open Protocol, or bytes that are not a message."""


# -- DDL action types (TiDB's model.ActionType) -------------------------------------------------

_ALTER = r"^\s*alter\s+table\s+\S+\s+"
_VIEW = (
    r"^\s*create\s+(?:or\s+replace\s+)?(?:algorithm\s*=\s*\S+\s+)?(?:definer\s*=\s*\S+\s+)?"
    r"(?:sql\s+security\s+\S+\s+)?view\b"
)
_ACTIONS = tuple(
    (re.compile(pattern, re.I), action)
    for pattern, action in (
        (r"^\s*create\s+(?:database|schema)\b", 1),
        (r"^\s*drop\s+(?:database|schema)\b", 2),
        (_VIEW, 21),
        (r"^\s*create\s+(?:temporary\s+)?table\b", 3),
        (r"^\s*drop\s+view\b", 24),
        (r"^\s*drop\s+table\b", 4),
        (r"^\s*truncate\b", 11),
        (r"^\s*rename\s+table\b", 14),
        (r"^\s*create\s+(?:unique\s+|fulltext\s+|spatial\s+)?index\b", 7),
        (r"^\s*drop\s+index\b", 8),
        (r"^\s*alter\s+(?:database|schema)\b", 26),
        (_ALTER + r"add\s+primary\s+key\b", 32),
        (_ALTER + r"drop\s+primary\s+key\b", 33),
        (_ALTER + r"add\s+(?:unique\s+)?(?:index|key|constraint)\b", 7),
        (_ALTER + r"drop\s+(?:index|key)\b", 8),
        (_ALTER + r"add\s+(?:column\s+)?", 5),
        (_ALTER + r"drop\s+(?:column\s+)?", 6),
        (_ALTER + r"(?:modify|change)\b", 12),
        (_ALTER + r"alter\s+(?:column\s+)?\S+\s+(?:set|drop)\s+default\b", 15),
        (_ALTER + r"rename\s+(?:index|key)\b", 18),
        (_ALTER + r"rename\b", 14),
        (_ALTER + r"comment\b", 17),
        (_ALTER + r"(?:convert\s+to\s+|(?:default\s+)?(?:character\s+set|charset)\b)", 22),
    )
)


def ddl_action(query: str) -> int:
    for pattern, action in _ACTIONS:
        if pattern.match(query):
            return action
    return 0


# -- JSON as Go's encoding/json writes it -------------------------------------------------------


def go_string(text: str) -> str:
    """A JSON string as Go writes it: UTF-8, with <, >, &, U+2028 and U+2029 escaped."""
    out = json.dumps(text, ensure_ascii=False)
    if any(c in out for c in "<>&\u2028\u2029"):
        out = (
            out.replace("<", "\\u003c")
            .replace(">", "\\u003e")
            .replace("&", "\\u0026")
            .replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029")
        )
    return out


def go_float(value: float, bits: int = 64) -> str:
    """A float as Go's encoding/json writes it (float32 with its own shortest digits)."""
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number")
    text = repr(value)
    if bits == 32:
        for digits in range(1, 10):
            short = f"{value:.{digits}g}"
            if _FLOAT32.unpack(_FLOAT32.pack(float(short)))[0] == value:
                text = short
                break
    magnitude = abs(float(text))
    if magnitude == 0 or 1e-6 <= magnitude < 1e21:
        fixed = format(Decimal(text), "f")
        if "." in fixed:
            fixed = fixed.rstrip("0").rstrip(".")
        return fixed
    mantissa, _, exp = text.partition("e")  # shortest digits in exponent form
    sign, power = exp[0], exp[1:].lstrip("0") or "0"
    return f"{mantissa}e{sign}{power if sign == '-' else power.zfill(2)}"


_GO_ESCAPES = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}


def go_quote(data: bytes) -> str:
    """Go's ``strconv.Quote`` of ``data`` without the surrounding quotes."""
    out: list[str] = []
    i = 0
    while i < len(data):
        char, width = _rune(data, i)
        if char is None:
            out.append(f"\\x{data[i]:02x}")
        elif char in ('"', "\\"):
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        elif ord(char) in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ord(char)])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
        i += width
    return "".join(out)


def _rune(data: bytes, i: int) -> tuple[str | None, int]:
    """The UTF-8 character at ``data[i]`` and its width, or (None, 1) for an invalid byte."""
    first = data[i]
    width = 1 if first < 0x80 else 2 if 0xC2 <= first < 0xE0 else 3 if 0xE0 <= first < 0xF0 else 4
    if first >= 0xF5 or (0x80 <= first < 0xC2):
        return None, 1
    try:
        return data[i : i + width].decode("utf-8"), width
    except UnicodeDecodeError:
        return None, 1


_UNQUOTE = re.compile(
    r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|[abfnrtv\\\"'])"
)
_SIMPLE = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34, "'": 39}


def go_unquote(text: str) -> bytes:
    """The bytes ``go_quote`` (Go's ``strconv.Quote``) wrote as ``text``."""
    out = bytearray()
    pos = 0
    for m in _UNQUOTE.finditer(text):
        out += text[pos : m.start()].encode()
        esc = m.group(1)
        if esc[0] == "x":
            out.append(int(esc[1:], 16))
        elif esc[0] in "uU":
            out += chr(int(esc[1:], 16)).encode()
        elif esc[0] in "01234567":
            out.append(int(esc, 8))
        else:
            out.append(_SIMPLE[esc])
        pos = m.end()
    out += text[pos:].encode()
    return bytes(out)


# -- encoding ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColumnPlan:
    name: str
    ct: ColType
    tp: int
    flags: int  # without the handle key flag, which depends on the row for tables without a PK


@dataclass(frozen=True, slots=True)
class Columns:
    """A table's columns in name order (as Go writes a map) with their type codes and flags."""

    info: TableInfo
    plan: tuple[ColumnPlan, ...]

    @classmethod
    def of(cls, info: TableInfo) -> Columns:
        multi = {c for k in _keys(info) if len(k) > 1 for c in k}
        plan = []
        for c in sorted(info.columns, key=lambda c: c.name):
            ct = column_type(c.mysql_type)
            tp = ct.tp if ct.tp is not None else mt.TYPE_VARCHAR
            flags = 0
            if ct.binary or tp not in _TEXT_CHARSET:
                flags |= BINARY
            if c.is_pk:
                flags |= PRIMARY_KEY
            if c.in_unique_key:
                flags |= UNIQUE_KEY
            if c.name in multi:
                flags |= MULTIPLE_KEY
            if ct.unsigned:
                flags |= UNSIGNED
            plan.append(ColumnPlan(c.name, ct, tp, flags))
        return cls(info, tuple(plan))

    def handle(self, row: Row) -> frozenset[str]:
        """The handle key: the primary key, else the first unique key with no NULL in ``row``."""
        if self.info.primary_key:
            return frozenset(self.info.primary_key)
        for uk in self.info.unique_keys:
            if all(row.get(c) is not None for c in uk.columns):
                return frozenset(uk.columns)
        return frozenset()

    def encode(self, row: Row, handle: frozenset[str], only_handle: bool) -> str:
        parts = []
        for p in self.plan:
            is_handle = p.name in handle
            if only_handle and not is_handle:
                continue
            h = ',"h":true' if is_handle else ""
            flags = p.flags | HANDLE_KEY if is_handle else p.flags
            v = json_value(p, row.get(p.name))
            parts.append(f'{go_string(p.name)}:{{"t":{p.tp}{h},"f":{flags},"v":{v}}}')
        return "{" + ",".join(parts) + "}"


def _keys(info: TableInfo) -> list[tuple[str, ...]]:
    keys = [u.columns for u in info.unique_keys]
    return [info.primary_key, *keys] if info.primary_key else keys


def _bytes(value: SqlValue) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogateescape")


def _text(value: SqlValue) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def json_value(p: ColumnPlan, value: SqlValue) -> str:
    """A column value as the JSON text TiCDC writes for it."""
    if value is None:
        return "null"
    tp = p.tp
    if tp in _INTS or tp == mt.TYPE_YEAR:
        return str(int(value))
    if tp == mt.TYPE_FLOAT:
        return go_float(float(value), 32)
    if tp == mt.TYPE_DOUBLE:
        return go_float(float(value))
    if tp == mt.TYPE_BIT:
        return str(int.from_bytes(value, "big") if isinstance(value, bytes) else int(value))
    if tp == mt.TYPE_ENUM:
        return str(value if isinstance(value, int) else enum_index(p.ct.elems, _text(value)))
    if tp == mt.TYPE_SET:
        return str(value if isinstance(value, int) else set_mask(p.ct.elems, _text(value)))
    if tp in _BLOBS:
        return '"' + base64.b64encode(_bytes(value)).decode() + '"'
    if tp in _STRINGS and p.ct.binary:
        return go_string(go_quote(_bytes(value)))
    return go_string(_text(value))


def event_key(
    ts: int, schema: str, table: str, kind: int, *, only_handle: bool = False, location: str = ""
) -> bytes:
    """An event key JSON, fields in Go's order, empty ones left out."""
    out = f'{{"ts":{ts}'
    if schema:
        out += f',"scm":{go_string(schema)}'
    if table:
        out += f',"tbl":{go_string(table)}'
    out += f',"t":{kind}'
    if only_handle:
        out += ',"ohk":true'
    if location:
        out += f',"ccl":{go_string(location)}'
    return (out + "}").encode()


def row_value(change: RowChange, cols: Columns, *, only_handle: bool = False) -> bytes:
    """A row event value: ``u`` (and ``p`` for an update) or ``d``."""
    try:
        handle = cols.handle(change.values)
        if only_handle and not handle:
            raise OpenProtocolError(
                f"{change.table.qualified} has no handle key (primary or unique key) to send"
            )
        body = cols.encode(change.values, handle, only_handle)
        if change.kind is RowKind.DELETE:
            return f'{{"d":{body}}}'.encode()
        if change.old_values is None:
            return f'{{"u":{body}}}'.encode()
        old = cols.encode(change.old_values, cols.handle(change.old_values), only_handle)
        return f'{{"u":{body},"p":{old}}}'.encode()
    except (ValueError, TypeError, KeyError) as e:
        raise OpenProtocolError(f"{change.table.qualified}: cannot write a row: {e}") from e


def ddl_value(ddl: Ddl) -> bytes:
    return f'{{"q":{go_string(ddl.query)},"t":{ddl_action(ddl.query)}}}'.encode()


def single(key: bytes, value: bytes) -> tuple[bytes, bytes]:
    """A message holding one event."""
    return (
        VERSION_HEAD + HEAD.pack(len(key)) + key,
        HEAD.pack(len(value)) + value,
    )


def resolved(ts: int) -> tuple[bytes, bytes]:
    key = event_key(ts, "", "", RESOLVED)
    return VERSION_HEAD + HEAD.pack(len(key)) + key, HEAD.pack(0)


def event_length(key: bytes, value: bytes) -> int:
    """What TiCDC counts for a one-event message against max-message-bytes."""
    return len(key) + len(value) + RECORD_OVERHEAD + 16 + 8


class Batch:
    """Row events of one topic partition packed into one message, as TiCDC's batch encoder."""

    def __init__(self) -> None:
        self.key = bytearray(VERSION_HEAD)
        self.value = bytearray()
        self.count = 0

    @property
    def length(self) -> int:
        return len(self.key) + len(self.value) + RECORD_OVERHEAD

    def fits(self, key: bytes, value: bytes, max_bytes: int, max_count: int) -> bool:
        if self.count == 0:
            return True
        return self.count < max_count and self.length + len(key) + len(value) + 16 <= max_bytes

    def add(self, key: bytes, value: bytes) -> None:
        self.key += HEAD.pack(len(key)) + key
        self.value += HEAD.pack(len(value)) + value
        self.count += 1


# -- decoding ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenEvent:
    """One decoded event: its type (ROW, DDL, RESOLVED), commit ts, and what it carries."""

    kind: int
    commit_ts: int
    key: dict[str, Any]
    value: dict[str, Any] | None
    row: RowChange | None = None
    ddl: Ddl | None = None

    @property
    def claim_check(self) -> str:
        return str(self.key.get("ccl", ""))


def events(key: bytes, value: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The (event key, event value) pairs of a message."""
    if len(key) < 8 or HEAD.unpack_from(key)[0] != VERSION:
        raise OpenProtocolError(f"not an open-protocol message (version {key[:8].hex()})")
    kpos, vpos = 8, 0
    while kpos < len(key):
        (klen,) = HEAD.unpack_from(key, kpos)
        (vlen,) = HEAD.unpack_from(value, vpos)
        kpos, vpos = kpos + 8 + klen, vpos + 8 + vlen
        if kpos > len(key) or vpos > len(value):
            raise OpenProtocolError("open-protocol message: a length past the end")
        yield key[kpos - klen : kpos], value[vpos - vlen : vpos]
    if vpos != len(value):
        raise OpenProtocolError("open-protocol message: the value has more than the key says")


def decode(key: bytes, value: bytes) -> list[OpenEvent]:
    try:
        out = []
        for k, v in events(key, value):
            kj = json.loads(k)
            kind, ts = int(kj["t"]), int(kj["ts"])
            vj = json.loads(v) if v else None
            if kind == RESOLVED:
                out.append(OpenEvent(kind, ts, kj, vj))
            elif kind == DDL:
                assert vj is not None
                ddl = Ddl(kj.get("scm", ""), vj["q"], kj.get("tbl", ""))
                out.append(OpenEvent(kind, ts, kj, vj, ddl=ddl))
            else:
                assert vj is not None
                out.append(OpenEvent(kind, ts, kj, vj, row=decode_row(kj, vj)))
        return out
    except (ValueError, KeyError, TypeError, AssertionError, struct.error) as e:
        raise OpenProtocolError(f"not an open-protocol message ({len(value)} bytes): {e!r}") from e


_TYPE_NAMES = {
    mt.TYPE_TINY: "tinyint",
    mt.TYPE_SHORT: "smallint",
    mt.TYPE_INT24: "mediumint",
    mt.TYPE_LONG: "int",
    mt.TYPE_LONGLONG: "bigint",
    mt.TYPE_FLOAT: "float",
    mt.TYPE_DOUBLE: "double",
    mt.TYPE_NEWDECIMAL: "decimal(65,30)",
    mt.TYPE_TIMESTAMP: "timestamp",
    mt.TYPE_DATE: "date",
    mt.TYPE_DURATION: "time",
    mt.TYPE_DATETIME: "datetime",
    mt.TYPE_YEAR: "year",
    mt.TYPE_BIT: "bit(64)",
    mt.TYPE_JSON: "json",
    mt.TYPE_ENUM: "int unsigned",  # the index: the message does not name the members
    mt.TYPE_SET: "bigint unsigned",  # the bit mask
}
_STRING_NAMES = {
    mt.TYPE_VARCHAR: ("varchar(65535)", "varbinary(65535)"),
    mt.TYPE_VAR_STRING: ("varchar(65535)", "varbinary(65535)"),
    mt.TYPE_STRING: ("char(255)", "binary(255)"),
    mt.TYPE_TINY_BLOB: ("tinytext", "tinyblob"),
    mt.TYPE_BLOB: ("text", "blob"),
    mt.TYPE_MEDIUM_BLOB: ("mediumtext", "mediumblob"),
    mt.TYPE_LONG_BLOB: ("longtext", "longblob"),
}


def _mysql_type(tp: int, flags: int) -> str:
    if tp in _STRING_NAMES:
        return _STRING_NAMES[tp][1 if flags & BINARY else 0]
    name = _TYPE_NAMES.get(tp, "varchar(65535)")
    return f"{name} unsigned" if flags & UNSIGNED and tp in _INTS else name


def _from_json(tp: int, flags: int, v: Any) -> SqlValue:
    if v is None:
        return None
    if tp in _BLOBS:
        data = base64.b64decode(v)
        return data if flags & BINARY else data.decode("utf-8")
    if tp in _STRINGS:
        return go_unquote(v) if flags & BINARY else str(v)
    if isinstance(v, (int, float)):
        return v
    return str(v)


def decode_row(key: dict[str, Any], value: dict[str, Any]) -> RowChange:
    """A row event back to a ``RowChange``; the table has the message's columns (name order),
    its primary key the columns flagged so, else the handle key as a unique key."""
    kind = RowKind.DELETE if "d" in value else RowKind.UPDATE if "p" in value else RowKind.INSERT
    cols: dict[str, Any] = value["d" if kind is RowKind.DELETE else "u"]
    pk = [n for n, c in cols.items() if c["f"] & PRIMARY_KEY]
    handle = [n for n, c in cols.items() if c["f"] & HANDLE_KEY]
    info = TableInfo.build(
        key.get("scm", ""),
        key.get("tbl", ""),
        [(n, _mysql_type(c["t"], c["f"])) for n, c in cols.items()],
        pk,
        {"handle": handle} if handle and not pk else None,
    )

    def row(part: dict[str, Any]) -> dict[str, SqlValue]:
        return {n: _from_json(c["t"], c["f"], c["v"]) for n, c in part.items()}

    if kind is RowKind.DELETE:
        return RowChange.delete(info, row(cols))
    if kind is RowKind.UPDATE:
        return RowChange.update(info, row(value["p"]), row(cols))
    return RowChange.insert(info, row(cols))
