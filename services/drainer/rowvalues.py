"""Row values as the drainer sends them downstream, and the compiled row decoder of a table.

Values, as tidb-binlog's translator (``formatData``) sends them but ENUM/SET by name:
integers, BIT and YEAR as int; FLOAT/DOUBLE float; DECIMAL its text with the scale kept
(``'1.50'``); strings str, binary strings bytes; DATE ``'2024-02-29'``, DATETIME/TIMESTAMP
``'2024-02-29 10:00:00.500'`` (as many fraction digits as the column's fsp; TIMESTAMP shown
in ``tz``); TIME ``'-838:59:59'``; ENUM the member's name; SET the members in definition
order, comma separated; JSON TiDB's text (``{"a": 1}``).

``sql_value`` is the definition (any datum, through ``tidbcodec.from_datum``);
``row_decoder`` adds shortcuts for the common cases (integers from int datums, strings from
bytes datums) that give exactly what ``sql_value`` gives and leaves the rest to it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Iterable
from typing import cast

from tributary.change import SqlValue
from tributary.tidbcodec import CoreTime, Datum, DecodeError, JsonNull, JsonValue, from_datum
from tributary.tidbcodec import mysqltypes as mt
from tributary.tidbcodec.enumset import set_to_str
from tributary.tidbcodec.json_text import to_text
from tributary.tidbcodec.number import UINT64_MAX
from tributary.tidbcodec.rowdecoder import Field, RowDecoder

Column = tuple[int, str, mt.ColumnType]  # id, name, type
Decoder = RowDecoder[SqlValue]


def sql_value(datum: Datum, name: str, ft: mt.ColumnType, tz: dt.tzinfo) -> SqlValue:
    """The value sent downstream for ``datum`` in column ``name`` of type ``ft``."""
    v = from_datum(datum, ft, tz)
    tp = ft.tp
    if v is None:
        return None
    if tp in mt.TIME_TYPES:
        return _time_text(v, ft)
    if tp == mt.TYPE_DURATION and isinstance(v, dt.timedelta):
        return _duration_text(v, ft.fsp)
    if tp == mt.TYPE_SET and isinstance(v, frozenset):
        return set_to_str(ft.elems, v)
    if tp == mt.TYPE_JSON:
        return to_text(None if isinstance(v, JsonNull) else cast(JsonValue, v))
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, int | float | str | bytes):
        return v
    raise DecodeError(f"column {name} of type {tp}: cannot send {v!r} downstream")


def _time_text(v: object, ft: mt.ColumnType) -> str:
    if isinstance(v, dt.date):
        v = CoreTime.from_python(v)
    if not isinstance(v, CoreTime):
        raise DecodeError(f"column type {ft.tp}: {v!r} is not a time")
    text = f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    if ft.tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE):
        return text
    text += f" {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    return text + (f".{v.microsecond:06d}"[: ft.fsp + 1] if ft.fsp else "")


def _duration_text(v: dt.timedelta, fsp: int) -> str:
    micros = (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{frac:06d}"[: fsp + 1] if fsp else "")


def _same(n: int) -> int:
    return n


def _wrapped(n: int) -> int:
    # An int handle is always written signed; unsigned columns read it back wrapped.
    return n & UINT64_MAX if n < 0 else n


def _ints(ft: mt.ColumnType) -> Callable[[int], SqlValue] | None:
    """What ``sql_value`` gives for an int/uint datum: the int itself for integer types."""
    if ft.tp in mt.INTEGER_TYPES or ft.tp in (mt.TYPE_YEAR, mt.TYPE_BIT):
        return _wrapped if ft.unsigned or ft.tp == mt.TYPE_BIT else _same
    return None


def _text(ft: mt.ColumnType) -> Callable[[bytes], SqlValue] | None:
    """What ``sql_value`` gives for a bytes datum: bytes or text for string types."""
    if ft.tp not in mt.STRING_TYPES:
        return None
    if ft.is_binary_string:
        return bytes
    encoding = ft.text_encoding

    def text(raw: bytes) -> str:
        return raw.decode(encoding, "surrogateescape")

    return text


def _field(column: Column, tz: dt.tzinfo) -> Field[SqlValue]:
    col_id, name, ft = column

    def datum(d: Datum) -> SqlValue:
        return sql_value(d, name, ft, tz)

    return Field(col_id, name, datum, _ints(ft), _text(ft))


def row_decoder(
    columns: Iterable[Column], handle: Iterable[Column | None], tz: dt.tzinfo
) -> Decoder:
    """The decoder of a table's rows: ``columns`` in table order, then what each handle datum
    of an inserted row fills (``None``: nothing)."""
    fields = {c[0]: _field(c, tz) for c in columns}
    return RowDecoder(
        list(fields.values()), [None if h is None else fields.get(h[0]) for h in handle]
    )
