"""How the debezium protocol writes a column: its Kafka Connect field schema and its values.

The mapping is the one of Debezium's MySQL connector with its default settings (as TiCDC's
debezium protocol follows it, except where noted), written as Kafka Connect's JSON converter
writes a schema (``type``, ``optional``, then ``name``, ``version``, ``parameters``, ``default``
when there are, and ``field``):

================================  ================================================  ==========
MySQL                             schema                                            value
================================  ================================================  ==========
TINYINT, SMALLINT (signed)        int16                                             number
SMALLINT UNSIGNED, MEDIUMINT, INT  int32                                            number
INT UNSIGNED, BIGINT              int64                                             number
BIGINT UNSIGNED                   int64 (``long``: a value over 2^63-1 is refused);  number
                                  ``precise``: Decimal scale 0; ``string``: string
FLOAT / DOUBLE                    float32 / float64                                 number
DECIMAL(p,s)                      ``precise`` (default): bytes                      base64 of
                                  ``org.apache.kafka.connect.data.Decimal``         the two's
                                  {scale: s, connect.decimal.precision: p};         complement
                                  ``string``: string; ``double``: float64 (lossy)   unscaled
DATE                              int32 io.debezium.time.Date                       days
TIME(fsp)                         int64 io.debezium.time.MicroTime                  µs, signed
DATETIME(0..3) / (4..6)           int64 io.debezium.time.Timestamp / MicroTimestamp  ms / µs
TIMESTAMP(fsp)                    string io.debezium.time.ZonedTimestamp            UTC ISO
YEAR                              int32 io.debezium.time.Year                       number
CHAR, VARCHAR, TEXT               string                                            text
BINARY, VARBINARY, BLOB           bytes (``binary`` bytes, the default)             base64
                                  string for ``base64``/``base64-url-safe``/``hex``
ENUM / SET                        string io.debezium.data.Enum / EnumSet             names
                                  {allowed: "a,b"}
BIT(1) / BIT(n)                   boolean / bytes io.debezium.data.Bits {length}    LE bytes
JSON                              string io.debezium.data.Json                      the text
GEOMETRY                          refused (TiCDC has no form for it either)
================================  ================================================  ==========

Temporal values are not shifted: a DATETIME is read as UTC (Debezium's rule), a TIMESTAMP is
read in ``time-zone`` (the zone the source shows it in, UTC by default) and written in UTC with
the column's fractional digits: ``2026-11-21T10:00:00.500Z``. A zero or invalid date, datetime
or timestamp (``0000-00-00``) becomes null in a nullable column and the epoch in a NOT NULL one,
as Debezium does: there is no exact form for it. TiCDC writes DECIMAL as a double by default
and the other BIGINT UNSIGNED values wrapped; here both are exact unless ``double`` is asked for.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from tributary.change import ColumnInfo, SqlValue
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka.canal import jstr
from tributary.sinks.kafka.secondary import type_name
from tributary.sinks.port import SinkError
from tributary.tidbcodec.enumset import enum_name, set_names, set_to_str

DECIMAL_MODES = ("precise", "string", "double")
UNSIGNED_MODES = ("long", "precise", "string")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")
_INT64_MAX = (1 << 63) - 1
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_EXACT = decimal.Context(prec=200)  # MySQL's DECIMAL has at most 65 digits: no rounding
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_PARAMS = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_F32 = struct.Struct("<f")
_SIGNED_INTS = {"tinyint": "int16", "smallint": "int16", "mediumint": "int32", "int": "int32"}
_SIGNED_INTS["bigint"] = "int64"
_UNSIGNED_INTS = {**_SIGNED_INTS, "smallint": "int32", "int": "int64"}

Encoder = Callable[[SqlValue], str]  # a value (not None) as JSON text


class DebeziumError(SinkError):
    """A column or value the debezium protocol cannot write exactly, or a message not its own."""


@dataclass(frozen=True, slots=True)
class Options:
    decimal: str = "precise"
    unsigned_bigint: str = "long"
    binary: str = "bytes"
    tz: dt.tzinfo = dt.UTC
    propagate: bool = False  # the source column's type in the schema parameters


@dataclass(frozen=True, slots=True)
class Field:
    """One column: its field schema (JSON object text) and its value encoder; ``null`` is what a
    value with no exact form becomes (null, or the epoch in a NOT NULL column)."""

    name: str
    schema: str
    encode: Encoder


def _params(mysql_type: str) -> tuple[int, int]:
    m = _PARAMS.search(mysql_type) if not mysql_type.lower().startswith(("enum", "set")) else None
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (-1, -1)


def _float32(x: float) -> str:
    if not math.isfinite(x):
        raise ValueError(f"{x} has no JSON form")
    v = _F32.unpack(_F32.pack(x))[0]
    for digits in range(1, 10):
        text = f"{v:.{digits}g}"
        if _F32.unpack(_F32.pack(float(text)))[0] == v:
            return text
    return repr(v)


def _float64(x: float) -> str:
    if not math.isfinite(x):
        raise ValueError(f"{x} has no JSON form")
    return repr(float(x))


def _int(v: SqlValue) -> str:
    if isinstance(v, bool) or not isinstance(v, int):
        v = int(str(v))
    return str(v)


def _long_unsigned(v: SqlValue) -> str:
    n = int(str(v)) if not isinstance(v, int) else v
    if n > _INT64_MAX:
        raise ValueError(
            f"BIGINT UNSIGNED {n} does not fit int64: set debezium-bigint-unsigned-handling-mode "
            "to precise or string"
        )
    return str(n)


def _unscaled(v: SqlValue, scale: int) -> int:
    d = v if isinstance(v, Decimal) else Decimal(str(v))
    scaled = d.scaleb(scale, _EXACT)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{d} has more than {scale} digits after the point")
    return int(scaled)


def decimal_bytes(n: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: the shortest two's complement, big-endian."""
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _b64(raw: bytes) -> str:
    return '"' + base64.b64encode(raw).decode() + '"'


def _decimal(scale: int, mode: str) -> Encoder:
    if mode == "string":
        return lambda v: jstr(f"{Decimal(_unscaled(v, scale)).scaleb(-scale, _EXACT):f}")
    if mode == "double":
        return lambda v: _float64(float(Decimal(str(v))))
    return lambda v: _b64(decimal_bytes(_unscaled(v, scale)))


def _text(v: SqlValue) -> str:
    if isinstance(v, bytes):
        v = v.decode("utf-8")  # strict: a string that is not UTF-8 is refused, not replaced
    return jstr(str(v))


def _binary(mode: str) -> Encoder:
    def raw(v: SqlValue) -> bytes:
        return v if isinstance(v, bytes) else str(v).encode("utf-8")

    if mode == "hex":
        return lambda v: '"' + raw(v).hex() + '"'
    if mode == "base64-url-safe":
        return lambda v: '"' + base64.urlsafe_b64encode(raw(v)).decode() + '"'
    return lambda v: _b64(raw(v))


def _date_days(v: SqlValue) -> int | None:
    text = str(v)
    try:
        return dt.date.fromisoformat(text[:10]).toordinal() - _EPOCH_DAY
    except ValueError:
        return None  # 0000-00-00 and other dates MySQL allows in non-strict modes


def _micros(text: str) -> int | None:
    """``YYYY-MM-DD hh:mm:ss[.f]`` as µs since the epoch, read as UTC."""
    days = _date_days(text)
    if days is None or len(text) < 19:
        return None
    clock = text[11:]
    seconds, _, frac = clock.partition(".")
    h, m, s = (int(p) for p in seconds.split(":"))
    return ((days * 86400 + h * 3600 + m * 60 + s) * 1_000_000) + int((frac + "000000")[:6])


def time_micros(text: str) -> int:
    """``[-]hhh:mm:ss[.f]`` as signed µs."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-")
    seconds, _, frac = body.partition(".")
    h, m, s = (int(p) for p in seconds.split(":"))
    return sign * ((h * 3600 + m * 60 + s) * 1_000_000 + int((frac + "000000")[:6]))


def _zoned(fsp: int, tz: dt.tzinfo) -> Callable[[SqlValue], str | None]:
    def encode(v: SqlValue) -> str | None:
        text = str(v)
        try:
            local = dt.datetime.fromisoformat(text).replace(tzinfo=tz)
        except ValueError:
            return None
        utc = local.astimezone(dt.UTC)
        out = utc.strftime("%Y-%m-%dT%H:%M:%S")
        if fsp > 0:
            out += f".{utc.microsecond:06d}"[: fsp + 1]
        return '"' + out + 'Z"'

    return encode


def _or_epoch(encode: Callable[[SqlValue], str | None], zero: str, nullable: bool) -> Encoder:
    """Values with no exact form: null when the column is nullable, ``zero`` otherwise."""

    def wrapped(v: SqlValue) -> str:
        out = encode(v)
        if out is None:
            return "null" if nullable else zero
        return out

    return wrapped


def _bit_int(v: SqlValue) -> int:
    return int.from_bytes(v, "big") if isinstance(v, bytes) else int(str(v))


def _bits(n: int) -> Encoder:
    size = (n + 7) // 8

    def encode(v: SqlValue) -> str:
        return _b64(_bit_int(v).to_bytes(size, "little"))

    return encode


def _enum(elems: tuple[str, ...]) -> Encoder:
    return lambda v: jstr(enum_name(elems, v) if isinstance(v, int) else _plain(v))


def _set(elems: tuple[str, ...]) -> Encoder:
    return lambda v: jstr(
        set_to_str(elems, set_names(elems, v)) if isinstance(v, int) else _plain(v)
    )


def _plain(v: SqlValue) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _shape(ct: ColType, name: str, mysql_type: str, opts: Options, nullable: bool) -> Any:
    """(schema type, logical name, parameters, encoder) of a column."""
    p, s = _params(mysql_type)
    if name in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        if name == "bigint" and ct.unsigned and opts.unsigned_bigint != "long":
            if opts.unsigned_bigint == "string":
                return "string", None, None, lambda v: jstr(str(v))
            params = {"scale": "0", "connect.decimal.precision": "20"}
            return "bytes", _DECIMAL, params, _decimal(0, "precise")
        kind = (_UNSIGNED_INTS if ct.unsigned else _SIGNED_INTS)[name]
        return kind, None, None, _long_unsigned if name == "bigint" and ct.unsigned else _int
    if name == "float":
        return "float", None, None, lambda v: _float32(float(str(v)))
    if name == "double":
        return "double", None, None, lambda v: _float64(float(str(v)))
    if name == "decimal":
        scale = max(s, 0)
        if opts.decimal == "precise":
            params = {"scale": str(scale), "connect.decimal.precision": str(p if p > 0 else 10)}
            return (
                "bytes",
                "org.apache.kafka.connect.data.Decimal",
                params,
                _decimal(scale, "precise"),
            )
        kind = "string" if opts.decimal == "string" else "double"
        return kind, None, None, _decimal(scale, opts.decimal)
    if name == "date":
        days = _or_epoch(lambda v: _str(_date_days(v)), "0", nullable)
        return "int32", "io.debezium.time.Date", None, days
    if name == "datetime":
        fsp = max(p, 0)
        unit = 1000 if fsp <= 3 else 1
        logical = "io.debezium.time.Timestamp" if fsp <= 3 else "io.debezium.time.MicroTimestamp"
        micros = _or_epoch(lambda v: _str(_div(_micros(str(v)), unit)), "0", nullable)
        return "int64", logical, None, micros
    if name == "timestamp":
        zoned = _or_epoch(_zoned(max(p, 0), opts.tz), '"1970-01-01T00:00:00Z"', nullable)
        return "string", "io.debezium.time.ZonedTimestamp", None, zoned
    if name == "time":
        return "int64", "io.debezium.time.MicroTime", None, lambda v: str(time_micros(str(v)))
    if name == "year":
        return "int32", "io.debezium.time.Year", None, _int
    if name == "enum":
        return "string", "io.debezium.data.Enum", {"allowed": ",".join(ct.elems)}, _enum(ct.elems)
    if name == "set":
        allowed = {"allowed": ",".join(ct.elems)}
        return "string", "io.debezium.data.EnumSet", allowed, _set(ct.elems)
    if name == "bit":
        n = max(p, 1)
        if n == 1:
            return "boolean", None, None, lambda v: "true" if _bit_int(v) else "false"
        return "bytes", "io.debezium.data.Bits", {"length": str(n)}, _bits(n)
    if name == "json":
        return "string", "io.debezium.data.Json", None, _text
    if ct.binary:
        return ("bytes" if opts.binary == "bytes" else "string"), None, None, _binary(opts.binary)
    return "string", None, None, _text


def _str(n: int | None) -> str | None:
    return None if n is None else str(n)


def _div(n: int | None, unit: int) -> int | None:
    return None if n is None else n // unit


def field(col: ColumnInfo, opts: Options, table: str, default: str | None = None) -> Field:
    """The plan of ``col`` of ``table`` (``db.t``, for errors), with its literal default."""
    ct = column_type(col.mysql_type)
    name = type_name(ct)
    if name in ("geometry", "unknown"):
        raise DebeziumError(
            f"{table}.{col.name}: a {col.mysql_type} column has no debezium form "
            "(TiCDC has none for it either)"
        )
    nullable = col.nullable and not col.is_pk
    kind, logical, params, encode = _shape(ct, name, col.mysql_type, opts, nullable)
    schema: dict[str, Any] = {"type": kind, "optional": nullable}
    if logical is not None:
        schema["name"] = logical
        schema["version"] = 1
    if opts.propagate:
        params = {**(params or {}), **_source_type(ct, name, col.mysql_type)}
    if params:
        schema["parameters"] = params
    if default is not None:
        try:
            value = encode(_default_value(name, default))
        except (ValueError, TypeError, InvalidOperation, OverflowError):
            value = "null"  # a default the type cannot hold (MySQL would have refused it)
        if value != "null":
            schema["default"] = json.loads(value)
    schema["field"] = col.name
    return Field(col.name, json.dumps(schema, ensure_ascii=False, separators=(",", ":")), encode)


def _source_type(ct: ColType, name: str, mysql_type: str) -> dict[str, str]:
    """Debezium's ``column.propagate.source.type`` parameters: ``VARCHAR``, length 32; a
    ``DECIMAL`` has its precision as length and its scale; temporals their fractional digits."""
    p, s = _params(mysql_type)
    word = mysql_type.split("(")[0].split()[0].upper() if mysql_type.strip() else name.upper()
    if ct.unsigned and name in _SIGNED_INTS:
        word += " UNSIGNED"
    out = {"__debezium.source.column.type": word}
    if p >= 0:
        out["__debezium.source.column.length"] = str(p)
    if name == "decimal" and p >= 0:
        out["__debezium.source.column.scale"] = str(max(s, 0))
    return out


def _default_value(name: str, text: str) -> SqlValue:
    if name in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
        return int(Decimal(text))
    if name == "bit":
        return int(text)
    return text
