"""Typed column values <-> the text forms sinks receive and databases store, by column type.

Shared by the binlog writers (the load generator and the ``pump://`` sink) and their checks.
Typed values: int (integers, YEAR, BIT), float, Decimal, str (text, ENUM), bytes (binary
strings), date, datetime (naive; TIMESTAMP in UTC), timedelta (TIME), frozenset[str] (SET),
JSON documents (``JSON_NULL`` for a JSON null) and None (SQL NULL). :func:`stored` gives the
form a column keeps in SQLite (the text the drainer's translator sends downstream:
``'2024-02-29 10:00:00.500'``, ``'-01:02:03.50'``, ``'a,c'``, decimals with their scale);
:func:`typed` reads any of those forms, or what a MySQL driver returns (BIT as bytes, SET as
``'a,c'``, JSON as text), back to the typed value that ``tidbcodec.to_datum`` encodes.
Invariant, for every value ``v`` a column of type ``ft`` can hold:
``typed(stored(v, ft), ft) == typed(v, ft)``; so comparing ``typed`` rows compares contents,
whatever database they were read from.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import cast

from tributary.tidbcodec import JSON_NULL, JsonNull, JsonValue
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.json_text import to_text
from tributary.tidbcodec.values import to_float32

_INT64 = 1 << 63
_INTS = mt.INTEGER_TYPES | {mt.TYPE_YEAR, mt.TYPE_BIT}

Value = object  # a typed value, see the module docstring


def datetime_text(v: dt.datetime, fsp: int) -> str:
    text = v.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{v.microsecond:06d}"[: fsp + 1] if fsp else "")


def duration_text(v: dt.timedelta, fsp: int = 6) -> str:
    micros = (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{frac:06d}"[: fsp + 1] if fsp else "")


def parse_duration(text: str) -> dt.timedelta:
    sign = -1 if text.startswith("-") else 1
    hms, _, frac = text.lstrip("-").partition(".")
    h, m, s = (int(p) for p in hms.split(":"))
    micros = int((frac + "000000")[:6]) if frac else 0
    return sign * dt.timedelta(hours=h, minutes=m, seconds=s, microseconds=micros)


def set_text(v: frozenset[str], elems: tuple[str, ...]) -> str:
    return ",".join(e for e in elems if e in v)


def json_text(v: Value) -> str:
    """TiDB's JSON text (keys sorted), which is what the drainer sends downstream too."""
    return "null" if isinstance(v, JsonNull) else to_text(cast(JsonValue, v))


def stored(v: Value, ft: mt.ColumnType) -> int | float | str | bytes | None:
    """The value as an SQLite column keeps it (and as MySQL accepts it as a parameter)."""
    if v is None:
        return None
    tp = ft.tp
    if isinstance(v, bool):
        raise TypeError(f"booleans are not column values: {v!r}")
    if tp in _INTS and isinstance(v, int):
        return v if -_INT64 <= v < _INT64 else str(v)
    if tp in mt.DECIMAL_TYPES and isinstance(v, Decimal):
        return format(v, "f")
    if tp in mt.TIME_TYPES:
        if isinstance(v, dt.datetime):
            return datetime_text(v, ft.fsp)
        if isinstance(v, dt.date):
            return v.isoformat()
    if tp == mt.TYPE_DURATION and isinstance(v, dt.timedelta):
        return duration_text(v, ft.fsp)
    if tp == mt.TYPE_SET and isinstance(v, frozenset | set):
        return set_text(frozenset(v), ft.elems)
    if tp == mt.TYPE_JSON:
        return json_text(v)
    if isinstance(v, int | float | str | bytes):
        return v
    raise TypeError(f"column type {tp} cannot store {type(v).__name__} {v!r}")


def typed(raw: object, ft: mt.ColumnType) -> Value:
    """The typed value of ``raw`` (stored text, a driver's value, or already typed)."""
    if raw is None:
        return None
    if isinstance(raw, memoryview | bytearray):
        raw = bytes(raw)
    tp = ft.tp
    if tp == mt.TYPE_BIT and isinstance(raw, bytes):
        return int.from_bytes(raw, "big")
    if tp in _INTS:
        return int(raw)  # type: ignore[call-overload]
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        f = float(raw)  # type: ignore[arg-type]
        return to_float32(f) if tp == mt.TYPE_FLOAT else f
    if tp in mt.DECIMAL_TYPES:
        d = Decimal(raw.decode() if isinstance(raw, bytes) else str(raw))
        return d.quantize(Decimal(1).scaleb(-ft.decimal)) if ft.decimal >= 0 else d
    if tp in mt.TIME_TYPES or tp == mt.TYPE_DURATION:
        return _temporal(raw, ft)
    if tp == mt.TYPE_SET:
        if isinstance(raw, set | frozenset):
            return frozenset(raw)
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return frozenset(p for p in text.split(",") if p)
    if tp == mt.TYPE_JSON:
        if isinstance(raw, str | bytes):
            doc = json.loads(raw)
            return JSON_NULL if doc is None else doc
        return raw
    if tp in mt.STRING_TYPES or tp == mt.TYPE_ENUM:
        if ft.is_binary_string:
            return raw.encode() if isinstance(raw, str) else raw
        return raw.decode(ft.text_encoding) if isinstance(raw, bytes) else raw
    return raw


def _temporal(raw: object, ft: mt.ColumnType) -> Value:
    tp = ft.tp
    if tp == mt.TYPE_DURATION:
        return raw if isinstance(raw, dt.timedelta) else parse_duration(str(raw))
    if isinstance(raw, str):
        raw = dt.datetime.fromisoformat(raw) if tp != mt.TYPE_DATE else dt.date.fromisoformat(raw)
    if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE) and isinstance(raw, dt.datetime):
        return raw.date()
    return raw
