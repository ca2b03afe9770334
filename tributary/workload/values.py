"""Random column values that the upstream stores exactly as generated.

Each value is chosen so that what MySQL/MariaDB (or SQLite) keeps equals the typed value the
binlog carries: decimals already at the column's scale, fractional seconds already at the
column's precision, FLOAT values that are exact in 32 bits (quarters) and DOUBLE values with a
short exact decimal form (1/1024ths), strings without trailing spaces (CHAR strips them),
TIMESTAMPs inside 1970..2038 (session time zone UTC), TIME inside its ±838 h range, JSON
documents of ints, strings and lists (no floats, no JSON null). Nullable columns get NULL
about one time in ten. Deterministic for a given ``random.Random``.
"""

from __future__ import annotations

import datetime as dt
import random
import string
from decimal import Decimal

from tributary.ddlhistory import ColumnInfo
from tributary.sinks.pump.values import Value
from tributary.tidbcodec import mysqltypes as mt

_ALPHABET = string.ascii_letters + string.digits + "_-éß中文"
_INT_BITS = {
    mt.TYPE_TINY: 8,
    mt.TYPE_SHORT: 16,
    mt.TYPE_INT24: 24,
    mt.TYPE_LONG: 32,
    mt.TYPE_LONGLONG: 64,
}
_EPOCH = dt.datetime(2001, 1, 1)
_SPAN_SECONDS = int((dt.datetime(2037, 12, 31) - _EPOCH).total_seconds())


def word(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(length))


def _int(rng: random.Random, ft: mt.ColumnType) -> int:
    bits = _INT_BITS.get(ft.tp, 32)
    if ft.unsigned:
        return rng.choice((rng.randrange(1 << bits), rng.randrange(1000)))
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return rng.choice((rng.randint(lo, hi), rng.randint(-1000, 1000)))


def _fraction(rng: random.Random, fsp: int) -> int:
    return rng.randrange(10**fsp) * 10 ** (6 - fsp) if fsp else 0


def _datetime(rng: random.Random, fsp: int) -> dt.datetime:
    moment = _EPOCH + dt.timedelta(seconds=rng.randrange(_SPAN_SECONDS))
    return moment.replace(microsecond=_fraction(rng, fsp))


def _decimal(rng: random.Random, ft: mt.ColumnType) -> Decimal:
    scale = max(ft.decimal, 0)
    digits = max(ft.flen, 1)
    unscaled = rng.randrange(-(10**digits) + 1, 10**digits)
    return Decimal(unscaled).scaleb(-scale)


def _string(rng: random.Random, ft: mt.ColumnType) -> str | bytes:
    limit = ft.flen if ft.flen > 0 else 64
    n = rng.randint(0, min(limit, 24))
    if ft.is_binary_string:
        return rng.randbytes(n)
    return word(rng, n)


def _json(rng: random.Random) -> Value:
    return {
        "n": rng.randint(-(10**6), 10**6),
        "s": word(rng, rng.randint(0, 8)),
        "list": [rng.randint(0, 99) for _ in range(rng.randint(0, 3))],
        "nested": {"ok": "yes" if rng.random() < 0.5 else "no"},
    }


def random_value(rng: random.Random, col: ColumnInfo, *, nulls: bool = True) -> Value:
    """A value for ``col`` (NULL sometimes when the column is nullable and ``nulls``)."""
    ft = col.ft
    if nulls and not ft.flag & mt.NOT_NULL_FLAG and rng.random() < 0.1:
        return None
    tp = ft.tp
    if tp in _INT_BITS:
        return _int(rng, ft)
    if tp == mt.TYPE_YEAR:
        return rng.randint(1901, 2155)
    if tp == mt.TYPE_BIT:
        return rng.randrange(1 << min(ft.flen if ft.flen > 0 else 1, 64))
    if tp == mt.TYPE_FLOAT:
        return rng.randint(-40_000, 40_000) / 4
    if tp == mt.TYPE_DOUBLE:
        return rng.randint(-(10**9), 10**9) / 1024
    if tp in mt.DECIMAL_TYPES:
        return _decimal(rng, ft)
    if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE):
        return _datetime(rng, 0).date()
    if tp in (mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP):
        return _datetime(rng, ft.fsp)
    if tp == mt.TYPE_DURATION:
        seconds = rng.randint(-800 * 3600, 800 * 3600)
        return dt.timedelta(seconds=seconds, microseconds=_fraction(rng, ft.fsp))
    if tp == mt.TYPE_ENUM:
        return rng.choice(ft.elems)
    if tp == mt.TYPE_SET:
        return frozenset(e for e in ft.elems if rng.random() < 0.4)
    if tp == mt.TYPE_JSON:
        return _json(rng)
    if tp in mt.STRING_TYPES:
        return _string(rng, ft)
    raise ValueError(f"column {col.name}: no generator for type {tp}")
