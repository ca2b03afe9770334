"""The canonical form of values: the one place deciding when two stored values are the same.

Both sides' values are turned into a ``Canon`` (None, int, str or bytes) by the column's
``ColumnType`` before anything is hashed or compared, so MariaDB's driver values (Decimal,
datetime, timedelta, date, bytes for BIT) and the SQLite sink's stored forms (MySQL literal
text, ints, bytes) meet in one form. NULL stays None, distinct from '' and 0.

=========  ============================================  ===================================
kind       canonical form                                example
=========  ============================================  ===================================
INT, BIT   int                                           b'\\x00\\x05' (BIT) -> 5
DECIMAL    text with exactly the column's scale          Decimal('1.5'), scale 2 -> '1.50'
FLOAT32    6 significant digits of the float32 value     1.100000023841858 -> '1.1'
FLOAT64    repr of the double                            0.1 -> '0.1'
DATE       'YYYY-MM-DD'                                  date(2024, 2, 29) -> '2024-02-29'
DATETIME   'YYYY-MM-DD HH:MM:SS[.f]', fsp digits         fsp 3: '... 10:00:00.500'
TIME       '[-]HH:MM:SS[.f]', fsp digits                 timedelta(hours=-1) -> '-01:00:00'
TEXT       str                                           'abc'
SET        members in definition order, comma joined     {'c', 'a'} -> 'a,c'
BYTES      bytes                                         b'ab\\x00\\x00'
JSON       parsed, dumped with sorted keys, no spaces    '{"b": 1, "a": 2}' -> '{"a":2,"b":1}'
=========  ============================================  ===================================

FLOAT keeps 6 significant digits because MariaDB prints FLOAT columns with 6 (FLT_DIG) while
the SQLite sink holds the exact float32; a difference below that is not reported.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import struct
from collections.abc import Sequence
from decimal import Decimal

from tributary.checker.coltypes import ColumnType, Kind

Canon = int | str | bytes | None
Row = tuple[Canon, ...]

_F32 = struct.Struct("<f")
_CONTEXT = decimal.Context(prec=200)


def canon(t: ColumnType, v: object) -> Canon:
    """``v`` (a driver value of a column of type ``t``) in canonical form."""
    if v is None:
        return None
    try:
        return _CANON[t.kind](t, v)
    except (ValueError, TypeError, ArithmeticError, OverflowError):
        return _raw(t, v)  # not what the type promises: compare it as stored


def _int(t: ColumnType, v: object) -> Canon:
    if isinstance(v, bytes):
        return int.from_bytes(v, "big")
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, int | str | Decimal):
        return int(v)
    raise TypeError(v)


def _decimal(t: ColumnType, v: object) -> Canon:
    d = Decimal(v.decode() if isinstance(v, bytes) else str(v))
    if not d.is_finite():
        raise ValueError(v)
    q = d.quantize(Decimal(1).scaleb(-t.scale), context=_CONTEXT)
    if q.is_zero():
        q = abs(q)
    return format(q, "f")


def _float32(t: ColumnType, v: object) -> Canon:
    x: float = _F32.unpack(_F32.pack(float(_number(v))))[0]
    return f"{x + 0.0:.6g}"  # + 0.0 turns -0.0 into 0.0


def _float64(t: ColumnType, v: object) -> Canon:
    return repr(float(_number(v)) + 0.0)


def _number(v: object) -> float | str:
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, int | float | str | Decimal):
        return float(v)
    raise TypeError(v)


def _fraction(text: str, fsp: int) -> str:
    """``text`` with exactly ``fsp`` fraction digits ('10:00:00.5', 3 -> '10:00:00.500')."""
    whole, _, frac = text.partition(".")
    return whole + ("." + (frac + "0" * fsp)[:fsp] if fsp else "")


def _date(t: ColumnType, v: object) -> Canon:
    if isinstance(v, dt.date):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    return _text(t, v)[:10]


def _datetime(t: ColumnType, v: object) -> Canon:
    if isinstance(v, dt.datetime):
        text = (
            f"{v.year:04d}-{v.month:02d}-{v.day:02d} "
            f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}"
        )
    elif isinstance(v, dt.date):
        text = f"{v.year:04d}-{v.month:02d}-{v.day:02d} 00:00:00"
    else:
        text = str(_text(t, v)).replace("T", " ")
    return _fraction(text, t.scale)


def _time(t: ColumnType, v: object) -> Canon:
    if isinstance(v, dt.timedelta):
        micros = (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
        sign, micros = ("-" if micros < 0 else ""), abs(micros)
        seconds, frac = divmod(micros, 1_000_000)
        h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
        return _fraction(f"{sign}{h:02d}:{m:02d}:{s:02d}.{frac:06d}", t.scale)
    if isinstance(v, dt.time):
        return _fraction(f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}", t.scale)
    return _fraction(str(_text(t, v)), t.scale)


def _text(t: ColumnType, v: object) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).decode("utf-8")
    raise TypeError(v)


def _set(t: ColumnType, v: object) -> Canon:
    if isinstance(v, set | frozenset):
        names = {str(m) for m in v}
        order = {m: i for i, m in enumerate(t.members)}
        return ",".join(sorted(names, key=lambda m: (order.get(m, len(order)), m)))
    return _text(t, v)


def _bytes(t: ColumnType, v: object) -> Canon:
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(v)


def _json(t: ColumnType, v: object) -> Canon:
    doc = json.loads(_text(t, v))
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _raw(t: ColumnType, v: object) -> Canon:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | str | bytes):
        return v
    if isinstance(v, float):
        return repr(v + 0.0)
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    return str(v)


_CANON = {
    Kind.INT: _int,
    Kind.BIT: _int,
    Kind.DECIMAL: _decimal,
    Kind.FLOAT32: _float32,
    Kind.FLOAT64: _float64,
    Kind.DATE: _date,
    Kind.DATETIME: _datetime,
    Kind.TIME: _time,
    Kind.TEXT: _text,
    Kind.SET: _set,
    Kind.BYTES: _bytes,
    Kind.JSON: _json,
    Kind.RAW: _raw,
}


def canon_row(types: Sequence[ColumnType], values: Sequence[object]) -> Row:
    return tuple(canon(t, v) for t, v in zip(types, values, strict=True))


def encode(row: Row) -> bytes:
    """An unambiguous byte form of a canonical row: each value tagged and length-prefixed."""
    out = bytearray()
    for v in row:
        if v is None:
            out += b"N"
        elif isinstance(v, int):
            out += b"I%d;" % v
        elif isinstance(v, str):
            data = v.encode("utf-8", "surrogatepass")
            out += b"S%d:" % len(data) + data
        else:
            out += b"B%d:" % len(v) + v
    return bytes(out)


def row_hash(row: Row) -> int:
    """A 128-bit hash of a canonical row."""
    return int.from_bytes(hashlib.blake2b(encode(row), digest_size=16).digest(), "big")


def sort_key(values: Sequence[Canon]) -> tuple[tuple[int, int | str | bytes], ...]:
    """An order over canonical tuples of mixed types (for listing diffs deterministically)."""
    return tuple((0, 0) if v is None else (1, v) if isinstance(v, int) else
                 (2, v) if isinstance(v, str) else (3, v) for v in values)  # fmt: skip


def display(v: Canon) -> str | int | None:
    """A canonical value for a report: bytes as ``0x`` hex, the rest as they are."""
    return "0x" + v.hex() if isinstance(v, bytes) else v
