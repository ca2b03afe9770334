"""Column-level temporal rules: fsp rounding and TIMESTAMP's UTC storage.

MySQL rounds fractional seconds half up to the column's fsp
(``DATETIME(2)``: ``.125`` -> ``.13``, which may carry into the next second);
TiDB stores TIMESTAMP in UTC and shows it in the session time zone. A naive
``datetime`` is taken to be in that session zone, an aware one is converted.
Example: session zone +08:00, ``2024-01-01 08:00:00`` is stored as
``2024-01-01 00:00:00``.
"""

from __future__ import annotations

import datetime as dt

from tributary.tidbcodec.errors import DecodeError, EncodeError
from tributary.tidbcodec.timecodec import CoreTime

_UNITS = (1_000_000, 100_000, 10_000, 1_000, 100, 10, 1)  # microseconds per fsp step
UTC = dt.UTC


def round_micros(micros: int, fsp: int) -> int:
    """Round a non-negative microsecond count half up to ``fsp`` digits."""
    unit = _UNITS[fsp]
    return (micros + unit // 2) // unit * unit


def round_datetime(value: dt.datetime, fsp: int) -> dt.datetime:
    rounded = round_micros(value.microsecond, fsp)
    if rounded == value.microsecond:
        return value
    try:
        return value.replace(microsecond=0) + dt.timedelta(microseconds=rounded)
    except OverflowError as e:
        raise EncodeError(f"{value} overflows when rounded to fsp {fsp}") from e


def round_timedelta(value: dt.timedelta, fsp: int) -> dt.timedelta:
    micros = value // dt.timedelta(microseconds=1)
    rounded = round_micros(abs(micros), fsp)
    return dt.timedelta(microseconds=-rounded if micros < 0 else rounded)


def timestamp_to_utc(value: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """Naive UTC datetime of a TIMESTAMP given naive-in-``tz`` or aware."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=tz)
    try:
        return aware.astimezone(UTC).replace(tzinfo=None)
    except OverflowError as e:
        raise EncodeError(f"TIMESTAMP {value} is out of range") from e


def timestamp_from_utc(core: CoreTime, tz: dt.tzinfo) -> CoreTime:
    """Show a stored (UTC) TIMESTAMP in ``tz``; the zero value stays zero."""
    if core.is_zero():
        return core
    naive = core.to_datetime()
    if naive is None:
        return core
    try:
        local = naive.replace(tzinfo=UTC).astimezone(tz)
    except OverflowError as e:
        raise DecodeError(f"TIMESTAMP {core} is out of range") from e
    return CoreTime.from_python(local.replace(tzinfo=None))
