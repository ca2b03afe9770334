"""Typed conversion between Python values and row datums, driven by a column's type.

This is what writers call to build binlog rows and what the drainer calls to
read them. Per column type (``ColumnType.tp``):

=====================  =================================  =====================
MySQL type             Python value                       datum
=====================  =================================  =====================
TINYINT..BIGINT        int                                Int / Uint (unsigned)
YEAR                   int                                Int
FLOAT / DOUBLE         float (FLOAT rounded to float32)   Float
DECIMAL                decimal.Decimal                    Decimal(flen, decimal)
CHAR/VARCHAR/TEXT      str (bytes for binary charset)     Bytes
DATE/DATETIME/TS       date / datetime (CoreTime if       Uint (packed; TS in UTC)
                       Python cannot hold it, e.g. zero)
TIME                   datetime.timedelta                 Int (nanoseconds)
BIT                    int                                Uint
ENUM                   str (element name)                 Uint (1-based index)
SET                    frozenset[str]                     Uint (bitmask)
JSON                   dict/list/str/int/float/bool,      Json
                       JSON_NULL for a JSON null
=====================  =================================  =====================

``None`` is SQL NULL for every type. Writers get MySQL's rounding (decimal
half up to the column scale, fractional seconds half up to the column fsp);
values that do not fit raise :class:`EncodeError`, datums that do not match
the column raise :class:`DecodeError`. ``tz`` is the session time zone that
TIMESTAMP values are shown in (TiDB stores them in UTC).
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import cast

from tributary.tidbcodec import enumset, json_binary
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.datum import (
    NULL,
    BytesDatum,
    Datum,
    DecimalDatum,
    FloatDatum,
    IntDatum,
    JsonDatum,
    UintDatum,
)
from tributary.tidbcodec.decimal import precision_and_frac
from tributary.tidbcodec.errors import EncodeError
from tributary.tidbcodec.number import check_int64, check_uint64
from tributary.tidbcodec.temporal import (
    UTC,
    round_datetime,
    round_timedelta,
    timestamp_to_utc,
)
from tributary.tidbcodec.timecodec import CoreTime, timedelta_to_nanos
from tributary.tidbcodec.unflatten import from_datum
from tributary.tidbcodec.values import JSON_NULL, JsonNull, SqlValue, to_float32

_DEC_CONTEXT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)


def _fail(value: object, ft: mt.ColumnType) -> EncodeError:
    return EncodeError(f"column type {ft.tp} cannot store {type(value).__name__} {value!r}")


def to_datum(value: object, ft: mt.ColumnType, tz: dt.tzinfo = UTC) -> Datum:
    """Python value -> the datum TiDB writes for a column of type ``ft``."""
    if value is None:
        return NULL
    tp = ft.tp
    if tp in mt.INTEGER_TYPES:
        if not isinstance(value, int):
            raise _fail(value, ft)
        return UintDatum(check_uint64(value)) if ft.unsigned else IntDatum(check_int64(value))
    if tp in mt.STRING_TYPES:
        if isinstance(value, str):
            return BytesDatum(value.encode(ft.text_encoding, "surrogateescape"))
        if isinstance(value, bytes | bytearray | memoryview):
            return BytesDatum(bytes(value))
        raise _fail(value, ft)
    if tp in mt.DECIMAL_TYPES:
        return _decimal_datum(value, ft)
    if tp in mt.TIME_TYPES:
        return UintDatum(_time_value(value, ft, tz).to_packed())
    return _to_datum_other(value, ft)


def _to_datum_other(value: object, ft: mt.ColumnType) -> Datum:
    tp = ft.tp
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        if not isinstance(value, int | float | decimal.Decimal):
            raise _fail(value, ft)
        return FloatDatum(to_float32(float(value)) if tp == mt.TYPE_FLOAT else float(value))
    if tp == mt.TYPE_YEAR:
        if not isinstance(value, int):
            raise _fail(value, ft)
        return IntDatum(check_int64(value))
    if tp == mt.TYPE_DURATION:
        if not isinstance(value, dt.timedelta):
            raise _fail(value, ft)
        return IntDatum(timedelta_to_nanos(round_timedelta(value, ft.fsp)))
    if tp == mt.TYPE_BIT:
        return UintDatum(_bit_value(value, ft))
    if tp == mt.TYPE_ENUM:
        if not isinstance(value, str | int):
            raise _fail(value, ft)
        return UintDatum(enumset.enum_index(ft.elems, value))
    if tp == mt.TYPE_SET:
        if not isinstance(value, str | int | set | frozenset | list | tuple):
            raise _fail(value, ft)
        return UintDatum(enumset.set_mask(ft.elems, value))
    if tp == mt.TYPE_JSON:
        return _json_datum(value)
    raise EncodeError(f"column type {tp} is not supported")


def _decimal_datum(value: object, ft: mt.ColumnType) -> DecimalDatum:
    if isinstance(value, float):
        value = repr(value)
    if not isinstance(value, decimal.Decimal | int | str):
        raise _fail(value, ft)
    try:
        dec = decimal.Decimal(value)
        if not dec.is_finite():
            raise EncodeError(f"{value!r} is not a finite decimal")
        if ft.flen > 0 and ft.decimal >= 0:
            dec = dec.quantize(decimal.Decimal(1).scaleb(-ft.decimal), context=_DEC_CONTEXT)
            precision, frac = precision_and_frac(dec)
            if precision - frac > ft.flen - ft.decimal:
                raise EncodeError(f"{value!r} overflows DECIMAL({ft.flen},{ft.decimal})")
            return DecimalDatum(dec, ft.flen, ft.decimal)
    except decimal.InvalidOperation as e:
        raise EncodeError(f"{value!r} is not a decimal") from e
    return DecimalDatum(dec)


def _time_value(value: object, ft: mt.ColumnType, tz: dt.tzinfo) -> CoreTime:
    if isinstance(value, CoreTime):
        return value
    if isinstance(value, dt.datetime):
        if ft.tp == mt.TYPE_TIMESTAMP:
            value = timestamp_to_utc(value, tz)
        elif value.tzinfo is not None:
            raise EncodeError(f"{ft.tp} column takes a naive datetime, got {value}")
        if ft.tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE):
            return CoreTime.from_python(value.date())
        return CoreTime.from_python(round_datetime(value, ft.fsp))
    if isinstance(value, dt.date):
        if ft.tp == mt.TYPE_TIMESTAMP:
            return CoreTime.from_python(timestamp_to_utc(dt.datetime(*value.timetuple()[:3]), tz))
        return CoreTime.from_python(value)
    raise _fail(value, ft)


def _bit_value(value: object, ft: mt.ColumnType) -> int:
    if isinstance(value, bytes | bytearray):
        value = int.from_bytes(value, "big")
    if not isinstance(value, int):
        raise _fail(value, ft)
    width = ft.flen if ft.flen > 0 else 64
    if not 0 <= value < 1 << min(width, 64):
        raise EncodeError(f"{value} does not fit BIT({width})")
    return value


def _json_datum(value: object) -> JsonDatum:
    if isinstance(value, JsonNull):
        value = None
    type_code, data = json_binary.encode(cast(json_binary.JsonValue, value))
    return JsonDatum(type_code, data)


__all__ = ["JSON_NULL", "JsonNull", "SqlValue", "from_datum", "to_datum"]
