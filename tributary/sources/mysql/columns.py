"""One TABLE_MAP column -> its MySQL type text (``change.ColumnInfo.mysql_type``) and the
decoder of its row-image values.

Values are what ``change.model`` carries: integers (BIT, YEAR too) int; FLOAT/DOUBLE float;
DECIMAL, temporal values as MySQL literal text; character strings str; binary strings and
geometry bytes; ENUM the member's name; SET its members comma-separated in definition order.
MariaDB's JSON is a LONGTEXT and decodes as text. MySQL's binary JSON is not read (an error
names the column).

Type text examples: ``bigint unsigned``, ``varchar(20)`` (80 bytes of utf8mb4),
``decimal(10,2)``, ``datetime(6)``, ``enum('a','b')``, ``binary(16)``.
"""

from __future__ import annotations

import datetime as dt

from tributary.change import SqlValue
from tributary.sources.mysql import numeric, temporal
from tributary.sources.mysql import tablemap as tm
from tributary.sources.mysql.charsets import Charset, Charsets
from tributary.sources.mysql.errors import MalformedEvent
from tributary.sources.mysql.numeric import Decoder

_INT_NAMES = {
    tm.T_TINY: ("tinyint", 1),
    tm.T_SHORT: ("smallint", 2),
    tm.T_INT24: ("mediumint", 3),
    tm.T_LONG: ("int", 4),
    tm.T_LONGLONG: ("bigint", 8),
}
_BLOB_NAMES = {1: "tiny", 2: "", 3: "medium", 4: "long"}
_GEOMETRY_NAMES = (
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
)


def _quote_members(members: tuple[str, ...]) -> str:
    return ",".join("'" + m.replace("'", "''") + "'" for m in members)


def mysql_type(col: tm.Column, cs: Charset | None) -> str:
    """The column's type as MySQL DDL writes it (display widths and defaults aside)."""
    t, meta = col.type, col.meta
    unsigned = " unsigned" if col.unsigned else ""
    if t in _INT_NAMES:
        return _INT_NAMES[t][0] + unsigned
    if t == tm.T_FLOAT:
        return "float" + unsigned
    if t == tm.T_DOUBLE:
        return "double" + unsigned
    if t == tm.T_NEWDECIMAL:
        return f"decimal({meta >> 8},{meta & 0xFF})" + unsigned
    binary = cs is None or cs.codec is None
    if t in (tm.T_VARCHAR, tm.T_VAR_STRING, tm.T_STRING):
        chars = meta if binary else meta // max(cs.maxlen if cs else 1, 1)
        if t == tm.T_STRING:
            return f"binary({chars})" if binary else f"char({chars})"
        return f"varbinary({chars})" if binary else f"varchar({chars})"
    if t == tm.T_BLOB:
        return _BLOB_NAMES.get(meta, "long") + ("blob" if binary else "text")
    if t == tm.T_ENUM:
        return f"enum({_quote_members(col.members)})"
    if t == tm.T_SET:
        return f"set({_quote_members(col.members)})"
    simple = {
        tm.T_DATE: "date",
        tm.T_YEAR: "year",
        tm.T_JSON: "json",
        tm.T_DATETIME: "datetime",
        tm.T_TIMESTAMP: "timestamp",
        tm.T_TIME: "time",
        tm.T_NULL: "null",
    }
    if t in simple:
        return simple[t]
    if t in (tm.T_DATETIME2, tm.T_TIMESTAMP2, tm.T_TIME2):
        name = {tm.T_DATETIME2: "datetime", tm.T_TIMESTAMP2: "timestamp", tm.T_TIME2: "time"}[t]
        return f"{name}({meta})" if meta else name
    if t == tm.T_BIT:
        return f"bit({(meta & 0xFF) * 8 + (meta >> 8)})"
    if t == tm.T_GEOMETRY:
        g = col.geometry
        return _GEOMETRY_NAMES[g] if 0 <= g < len(_GEOMETRY_NAMES) else "geometry"
    return f"type{t}"


def _length_prefixed(size: int, codec: str | None) -> Decoder:
    if codec is None:
        if size == 1:

            def bytes1(buf: bytes, pos: int) -> tuple[SqlValue, int]:
                end = pos + 1 + buf[pos]
                return buf[pos + 1 : end], end

            return bytes1

        def bytes_n(buf: bytes, pos: int) -> tuple[SqlValue, int]:
            start = pos + size
            end = start + int.from_bytes(buf[pos:start], "little")
            return buf[start:end], end

        return bytes_n
    if size == 1:

        def text1(buf: bytes, pos: int) -> tuple[SqlValue, int]:
            end = pos + 1 + buf[pos]
            return buf[pos + 1 : end].decode(codec), end

        return text1

    def text_n(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        start = pos + size
        end = start + int.from_bytes(buf[pos:start], "little")
        return buf[start:end].decode(codec), end

    return text_n


def _binary_char(length: int) -> Decoder:
    inner = _length_prefixed(1 if length < 256 else 2, None)

    def binary_char(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        v, end = inner(buf, pos)
        assert isinstance(v, bytes)
        return v.ljust(length, b"\0"), end  # the binlog drops BINARY(n)'s trailing zeros

    return binary_char


def _enum(col: tm.Column) -> Decoder:
    size, members = col.meta, ("", *col.members)

    def enum(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        i = int.from_bytes(buf[pos : pos + size], "little")
        return (members[i] if i < len(members) else ""), pos + size

    return enum


def _set(col: tm.Column) -> Decoder:
    size, members = col.meta, col.members

    def set_(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        bits = int.from_bytes(buf[pos : pos + size], "little")
        return ",".join(m for i, m in enumerate(members) if bits >> i & 1), pos + size

    return set_


def decoder(col: tm.Column, cs: Charset | None, tz: dt.tzinfo) -> Decoder:
    t, meta = col.type, col.meta
    if t in _INT_NAMES:
        return numeric.int_decoder(_INT_NAMES[t][1], col.unsigned)
    codec = cs.codec if cs is not None else None
    simple: dict[int, Decoder] = {
        tm.T_FLOAT: numeric.float_decoder,
        tm.T_DOUBLE: numeric.double_decoder,
        tm.T_YEAR: numeric.year_decoder,
        tm.T_DATE: temporal.date_decoder,
        tm.T_DATETIME: temporal.datetime_v1_decoder,
        tm.T_TIME: temporal.time_v1_decoder,
    }
    if t in simple:
        return simple[t]
    if t == tm.T_NEWDECIMAL:
        return numeric.decimal_decoder(meta >> 8, meta & 0xFF)
    if t == tm.T_BIT:
        return numeric.bit_decoder(meta)
    if t in (tm.T_VARCHAR, tm.T_VAR_STRING):
        return _length_prefixed(1 if meta < 256 else 2, codec)
    if t == tm.T_STRING:
        if codec is None:
            return _binary_char(meta)
        return _length_prefixed(1 if meta < 256 else 2, codec)
    if t == tm.T_BLOB:
        return _length_prefixed(meta, codec)
    if t == tm.T_GEOMETRY:
        return _length_prefixed(meta, None)
    if t == tm.T_ENUM:
        return _enum(col)
    if t == tm.T_SET:
        return _set(col)
    if t == tm.T_DATETIME2:
        return temporal.datetime2_decoder(meta)
    if t == tm.T_TIMESTAMP2:
        return temporal.timestamp2_decoder(meta, tz)
    if t == tm.T_TIMESTAMP:
        return temporal.timestamp_v1_decoder(tz)
    if t == tm.T_TIME2:
        return temporal.time2_decoder(meta)
    raise MalformedEvent(f"column {col.name!r}: binlog type {t} is not supported")


def charset_of(col: tm.Column, charsets: Charsets) -> Charset | None:
    """The column's character set; None for binary strings and non-character types."""
    if col.type not in tm.CHARACTER:
        return None
    if col.collation == 0:  # no metadata: MariaDB/MySQL write it for every character column
        return None
    cs = charsets.get(col.collation)
    return None if cs.codec is None else cs
