"""Row datum -> Python value for a column (TiDB's ``tablecodec.Unflatten`` step).

The mapping table is in :mod:`tidbcodec.convert`. Kinds TiDB itself accepts
are accepted (an int handle read into an unsigned column wraps to uint64, as
the drainer's ``fixType`` does); any other datum that does not fit the column
raises :class:`DecodeError`, so schema drift is loud.
"""

from __future__ import annotations

import datetime as dt

from tributary.tidbcodec import enumset, json_binary
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.datum import (
    BytesDatum,
    Datum,
    DecimalDatum,
    DurationDatum,
    FloatDatum,
    IntDatum,
    JsonDatum,
    NullDatum,
    UintDatum,
)
from tributary.tidbcodec.errors import CodecError, DecodeError
from tributary.tidbcodec.number import UINT64_MAX
from tributary.tidbcodec.temporal import UTC, timestamp_from_utc
from tributary.tidbcodec.timecodec import CoreTime, nanos_to_timedelta
from tributary.tidbcodec.values import JSON_NULL, SqlValue, to_float32


def from_datum(d: Datum, ft: mt.ColumnType, tz: dt.tzinfo = UTC) -> SqlValue:
    """A decoded row datum -> the Python value of a column of type ``ft``."""
    if isinstance(d, NullDatum):
        return None
    tp = ft.tp
    if tp in mt.INTEGER_TYPES or tp in (mt.TYPE_YEAR, mt.TYPE_BIT):
        n = _int_of(d, ft)
        # An int handle is always written signed; unsigned columns read it back wrapped.
        return n & UINT64_MAX if n < 0 and (ft.unsigned or tp == mt.TYPE_BIT) else n
    if tp in mt.STRING_TYPES:
        raw = _bytes_of(d, ft)
        return raw if ft.is_binary_string else raw.decode(ft.text_encoding, "surrogateescape")
    if tp in mt.DECIMAL_TYPES:
        if not isinstance(d, DecimalDatum):
            raise _mismatch(d, ft)
        return d.value
    if tp in mt.TIME_TYPES:
        return _time_of(d, ft, tz)
    return _from_datum_other(d, ft)


def _from_datum_other(d: Datum, ft: mt.ColumnType) -> SqlValue:
    tp = ft.tp
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        if not isinstance(d, FloatDatum):
            raise _mismatch(d, ft)
        return to_float32(d.value) if tp == mt.TYPE_FLOAT else d.value
    if tp == mt.TYPE_DURATION:
        if isinstance(d, DurationDatum):
            return nanos_to_timedelta(d.nanos)
        return nanos_to_timedelta(_int_of(d, ft))
    if tp == mt.TYPE_ENUM:
        return enumset.enum_name(ft.elems, _int_of(d, ft))
    if tp == mt.TYPE_SET:
        return enumset.set_names(ft.elems, _int_of(d, ft))
    if tp == mt.TYPE_JSON:
        if not isinstance(d, JsonDatum):
            raise _mismatch(d, ft)
        doc = json_binary.decode(d.type_code, d.data)
        return JSON_NULL if doc is None else doc
    if isinstance(d, BytesDatum):
        return d.value
    raise _mismatch(d, ft)


def _mismatch(d: Datum, ft: mt.ColumnType) -> DecodeError:
    return DecodeError(f"column type {ft.tp} cannot hold datum {d!r}")


def _int_of(d: Datum, ft: mt.ColumnType) -> int:
    if isinstance(d, IntDatum | UintDatum):
        return d.value
    raise _mismatch(d, ft)


def _bytes_of(d: Datum, ft: mt.ColumnType) -> bytes:
    if isinstance(d, BytesDatum):
        return d.value
    raise _mismatch(d, ft)


def _time_of(d: Datum, ft: mt.ColumnType, tz: dt.tzinfo) -> SqlValue:
    packed = _int_of(d, ft)
    try:
        core = CoreTime.from_packed(packed)
    except CodecError as e:
        raise _mismatch(d, ft) from e
    if ft.tp == mt.TYPE_TIMESTAMP:
        core = timestamp_from_utc(core, tz)
    value = core.to_date() if ft.tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE) else core.to_datetime()
    return core if value is None else value
