"""How the avro protocol writes a column: its Avro field schema and its value, as TiCDC does.

Each field's type carries ``connect.parameters`` ``{"tidb_type": ...}`` (Kafka Connect's
AvroConverter reads them as the field's parameters); a nullable column is the union
``["null", T]`` with default null, a NOT NULL one ``T`` with its literal default when the DDL
gave one (``["T", "null"]`` with that default for a nullable column with a non-null default):

================================  =======================  ===================================
MySQL                             Avro type (tidb_type)    value
================================  =======================  ===================================
TINYINT, SMALLINT, MEDIUMINT      int (INT [UNSIGNED])     the number
INT                               int; UNSIGNED: long      the number
BIGINT                            long (BIGINT)            the number
BIGINT UNSIGNED                   ``long`` (default): long a value over 2^63-1 is refused (TiCDC
                                  ``string``: string       wraps it); ``string``: decimal text
FLOAT / DOUBLE                    float / double           the number
DECIMAL(p,s)                      ``precise`` (default):   Avro's decimal: the unscaled value's
                                  bytes, logicalType       two's complement, big-endian
                                  decimal, precision p,
                                  scale s; ``string``
CHAR, VARCHAR, TEXT               string (TEXT)            the text (UTF-8; other bytes refused)
BINARY, VARBINARY, BLOB           bytes (BLOB)             the bytes
ENUM / SET                        string (ENUM / SET,      the member names (``a,b`` for a SET)
                                  ``allowed``: a,b,c)
BIT(n)                            bytes (BIT, length n)    the value's big-endian bytes, the
                                                           fewest that hold it (at least one)
JSON                              string (JSON)            the text
DATE, DATETIME, TIMESTAMP, TIME   string                   the text as the source shows it
                                                           (``0000-00-00`` stays as it is)
YEAR                              int (YEAR)               the number
GEOMETRY and unknown types        refused
================================  =======================  ===================================

Names that Avro does not allow (a first digit, characters other than ``[A-Za-z0-9_]``) are
written as TiCDC writes them: ``_`` in place of each such character, ``_`` before a first
digit. Two columns whose names become the same are refused (Avro would reject the schema).
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tributary.change import ColumnInfo, SqlValue
from tributary.sinks.file.pbcodec import ColType, column_type
from tributary.sinks.kafka.secondary import type_name
from tributary.sinks.port import SinkError
from tributary.tidbcodec.enumset import enum_name, set_names, set_to_str

DECIMAL_MODES = ("precise", "string")
UNSIGNED_MODES = ("long", "string")
_INT64_MAX = (1 << 63) - 1
_EXACT = decimal.Context(prec=200)  # MySQL's DECIMAL has at most 65 digits: no rounding
_PARAMS = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
_SMALL_INTS = ("tinyint", "smallint", "mediumint")

Convert = Callable[[SqlValue], Any]  # a value (not None) as fastavro takes it


class AvroError(SinkError):
    """A column or value the avro protocol cannot write exactly."""


@dataclass(frozen=True, slots=True)
class Options:
    decimal: str = "precise"
    unsigned_bigint: str = "long"


@dataclass(frozen=True, slots=True)
class Field:
    """One column: its Avro field (a dict ready for the schema) and its value conversion."""

    column: str  # the column's name in the row
    name: str  # its Avro name
    schema: dict[str, Any]
    convert: Convert


def sanitize(name: str) -> str:
    """TiCDC's ``sanitizeName``: an Avro name for ``name``."""
    out = _NOT_NAME.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def _params(mysql_type: str) -> tuple[int, int]:
    m = _PARAMS.search(mysql_type) if not mysql_type.lower().startswith(("enum", "set")) else None
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (-1, -1)


def _int(v: SqlValue) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else int(str(v))


def _long_unsigned(v: SqlValue) -> int:
    n = _int(v)
    if n > _INT64_MAX:
        raise ValueError(
            f"BIGINT UNSIGNED {n} does not fit Avro's long: set "
            "avro-bigint-unsigned-handling-mode=string"
        )
    return n


def _exact_decimal(scale: int) -> Convert:
    def convert(v: SqlValue) -> Decimal:
        d = v if isinstance(v, Decimal) else Decimal(str(v))
        scaled = d.scaleb(scale, _EXACT)
        if scaled != scaled.to_integral_value():
            raise ValueError(f"{d} has more than {scale} digits after the point")
        return Decimal(int(scaled)).scaleb(-scale, _EXACT)

    return convert


def _decimal_text(v: SqlValue) -> str:
    d = v if isinstance(v, Decimal) else Decimal(str(v))
    return f"{d:f}"


def _text(v: SqlValue) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8")  # strict: a string that is not UTF-8 is refused, not replaced
    return str(v)


def _bytes(v: SqlValue) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode("utf-8")


def _bit(v: SqlValue) -> bytes:
    n = int.from_bytes(v, "big") if isinstance(v, bytes) else _int(v)
    return n.to_bytes(max((n.bit_length() + 7) // 8, 1), "big")


def _enum(elems: tuple[str, ...]) -> Convert:
    return lambda v: enum_name(elems, v) if isinstance(v, int) else _text(v)


def _set(elems: tuple[str, ...]) -> Convert:
    return lambda v: set_to_str(elems, set_names(elems, v)) if isinstance(v, int) else _text(v)


def _float(v: SqlValue) -> float:
    return float(str(v)) if not isinstance(v, float) else v


def _escape_member(member: str) -> str:
    return member.replace(",", "\\,")


def _shape(ct: ColType, name: str, mysql_type: str, opts: Options) -> tuple[Any, str, Convert]:
    """(Avro type, tidb_type, conversion) of a column."""
    unsigned = " UNSIGNED" if ct.unsigned else ""
    if name in _SMALL_INTS:
        return "int", "INT" + unsigned, _int
    if name == "int":
        return ("long" if ct.unsigned else "int"), "INT" + unsigned, _int
    if name == "bigint":
        if ct.unsigned and opts.unsigned_bigint == "string":
            return "string", "BIGINT UNSIGNED", lambda v: str(_int(v))
        return "long", "BIGINT" + unsigned, _long_unsigned if ct.unsigned else _int
    if name in ("float", "double"):
        return name, name.upper(), _float
    if name == "decimal":
        p, s = _params(mysql_type)
        precision, scale = (p if p > 0 else 10), max(s, 0)
        if opts.decimal == "string":
            return "string", "DECIMAL", _decimal_text
        logical = {"logicalType": "decimal", "precision": precision, "scale": scale}
        return logical, "DECIMAL", _exact_decimal(scale)
    if name in ("date", "datetime", "timestamp", "time"):
        return "string", name.upper(), str
    if name == "year":
        return "int", "YEAR", _int
    if name in ("enum", "set"):
        convert = _enum(ct.elems) if name == "enum" else _set(ct.elems)
        return "string", name.upper(), convert
    if name == "bit":
        return "bytes", "BIT", _bit
    if name == "json":
        return "string", "JSON", _text
    if ct.binary:
        return "bytes", "BLOB", _bytes
    return "string", "TEXT", _text


def field(col: ColumnInfo, opts: Options, table: str, default: str | None = None) -> Field:
    """The Avro field of ``col`` of ``table`` (``db.t``, for errors), with its literal default."""
    ct = column_type(col.mysql_type)
    name = type_name(ct)
    if name in ("geometry", "unknown"):
        raise AvroError(
            f"{table}.{col.name}: a {col.mysql_type} column has no avro form "
            "(TiCDC has none for it either)"
        )
    avro, tidb_type, convert = _shape(ct, name, col.mysql_type, opts)
    params = {"tidb_type": tidb_type}
    if name in ("enum", "set"):
        params["allowed"] = ",".join(_escape_member(e) for e in ct.elems)
    elif name == "bit":
        params["length"] = str(max(_params(col.mysql_type)[0], 1))
    if isinstance(avro, dict):
        typ: dict[str, Any] = {"type": "bytes", "connect.parameters": params, **avro}
    else:
        typ = {"type": avro, "connect.parameters": params}
    nullable = col.nullable and not col.is_pk
    out: dict[str, Any] = {"name": sanitize(col.name)}
    value = _default(convert, name, default) if not isinstance(avro, dict) else None
    if nullable and value is None:
        out["type"], out["default"] = ["null", typ], None
    elif nullable:
        out["type"], out["default"] = [typ, "null"], value
    else:
        out["type"] = typ
        if value is not None:
            out["default"] = value
    return Field(col.name, out["name"], out, convert)


def _default(convert: Convert, name: str, text: str | None) -> Any:
    """A literal default as the schema's JSON holds it (None: none or none that fits)."""
    if text is None:
        return None
    try:
        if name == "bit":
            value: Any = convert(int(text))
        elif name in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
            value = convert(int(Decimal(text)))
        else:
            value = convert(text)
    except (ValueError, TypeError, ArithmeticError, UnicodeDecodeError):
        return None  # a default the type cannot hold (MySQL would have refused it)
    if isinstance(value, bytes):
        return value.decode("latin-1")  # Avro's JSON form of bytes: one code point per byte
    return value
