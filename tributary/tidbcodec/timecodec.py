"""MySQL temporal values as TiDB stores them in rows.

DATE / DATETIME / TIMESTAMP are a packed uint64 (``types.Time.ToPackedUint``)::

    1 bit 0 | 17 bits year*13+month | 5 bits day | 5 bits hour
            | 6 bits minute | 6 bits second | 24 bits microsecond

so ``2016-06-23 11:30:45`` packs ``ymd = (2016*13+6) << 5 | 23 = 838871`` and
``hms = 11 << 12 | 30 << 6 | 45 = 47021`` into
``((ymd << 17 | hms) << 24) | 0``. The zero date packs to 0. TIMESTAMP values
are packed in UTC; the session time zone is applied by the caller
(:mod:`tidbcodec.convert`).

TIME (a duration) is an int64 count of nanoseconds; TiDB never stores more
than microsecond precision, so it maps onto ``datetime.timedelta`` exactly.

:class:`CoreTime` keeps the raw fields so that values Python's ``datetime``
cannot hold (``0000-00-00``, ``2020-02-00``) still round-trip.
"""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from tributary.tidbcodec.errors import DecodeError, EncodeError

_LIMITS = (
    ("year", 9999),
    ("month", 12),
    ("day", 31),
    ("hour", 23),
    ("minute", 59),
    ("second", 59),
    ("microsecond", 999_999),
)


class CoreTime(NamedTuple):
    """The fields of a MySQL DATE/DATETIME/TIMESTAMP, zeros allowed."""

    year: int = 0
    month: int = 0
    day: int = 0
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    def is_zero(self) -> bool:
        return not any(self)

    def to_packed(self) -> int:
        for (name, top), value in zip(_LIMITS, self, strict=True):
            if not 0 <= value <= top:
                raise EncodeError(f"{name}={value} out of range in {self}")
        ymd = ((self.year * 13 + self.month) << 5) | self.day
        hms = (self.hour << 12) | (self.minute << 6) | self.second
        return (((ymd << 17) | hms) << 24) | self.microsecond

    @classmethod
    def from_packed(cls, packed: int) -> CoreTime:
        if not 0 <= packed < 1 << 64:
            raise DecodeError(f"packed time {packed} is not a uint64")
        if packed == 0:
            return cls()
        ymdhms = packed >> 24
        ymd = ymdhms >> 17
        ym = ymd >> 5
        hms = ymdhms & ((1 << 17) - 1)
        return cls(
            year=ym // 13,
            month=ym % 13,
            day=ymd & 0x1F,
            hour=hms >> 12,
            minute=(hms >> 6) & 0x3F,
            second=hms & 0x3F,
            microsecond=packed & 0xFFFFFF,
        )

    @classmethod
    def from_python(cls, value: dt.date) -> CoreTime:
        """From a ``date`` or a naive ``datetime`` (tz conversion is the caller's job)."""
        if isinstance(value, dt.datetime):
            return cls(
                value.year,
                value.month,
                value.day,
                value.hour,
                value.minute,
                value.second,
                value.microsecond,
            )
        return cls(value.year, value.month, value.day)

    def to_core_bits(self) -> int:
        """TiDB's in-memory ``CoreTime`` layout (used inside binary JSON), fsp bits zero."""
        self.to_packed()  # range check
        return (
            self.year << 50
            | self.month << 46
            | self.day << 41
            | self.hour << 36
            | self.minute << 30
            | self.second << 24
            | self.microsecond << 4
        )

    @classmethod
    def from_core_bits(cls, bits: int) -> CoreTime:
        return cls(
            year=(bits >> 50) & 0x3FFF,
            month=(bits >> 46) & 0xF,
            day=(bits >> 41) & 0x1F,
            hour=(bits >> 36) & 0x1F,
            minute=(bits >> 30) & 0x3F,
            second=(bits >> 24) & 0x3F,
            microsecond=(bits >> 4) & 0xFFFFF,
        )

    def to_datetime(self) -> dt.datetime | None:
        """A naive datetime, or None when Python cannot represent the value."""
        try:
            return dt.datetime(*self)
        except ValueError:
            return None

    def to_date(self) -> dt.date | None:
        try:
            return dt.date(self.year, self.month, self.day)
        except ValueError:
            return None


NANOS_PER_MICRO = 1000
MAX_DURATION_NANOS = (838 * 3600 + 59 * 60 + 59) * 10**9  # TIME is -838:59:59 .. 838:59:59


def timedelta_to_nanos(value: dt.timedelta) -> int:
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    nanos = micros * NANOS_PER_MICRO
    if abs(nanos) > MAX_DURATION_NANOS:
        raise EncodeError(f"{value} is outside MySQL TIME's range")
    return nanos


def nanos_to_timedelta(nanos: int) -> dt.timedelta:
    """Exact for microsecond multiples; finer digits are truncated toward zero."""
    micros = abs(nanos) // NANOS_PER_MICRO
    return dt.timedelta(microseconds=-micros if nanos < 0 else micros)
