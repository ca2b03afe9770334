"""Decoders of temporal row-image values, as MySQL literal strings.

Formats (MySQL 5.6+ "temporal2", which MySQL and MariaDB write by default):

* DATE, 3 bytes little-endian: ``day | month << 5 | year << 9``.
* DATETIME2(fsp), 5 bytes big-endian, minus 2^39: ``(year*13 + month) << 22 | day << 17 |
  hour << 12 | minute << 6 | second``, then ``(fsp+1)//2`` bytes of fraction.
* TIMESTAMP2(fsp), 4 bytes big-endian seconds since the epoch, then the fraction; shown in
  the source's time zone (0 is ``0000-00-00 00:00:00``).
* TIME2(fsp), 3 bytes big-endian minus 2^23: ``sign, hour << 12 | minute << 6 | second``,
  then the fraction (negative values borrow from the integer part).

Worked example, DATETIME2(0) ``2024-02-29 10:00:05``: year*13+month = 26314, so the packed
value is 26314 << 22 | 29 << 17 | 10 << 12 | 0 << 6 | 5 = 110372757509; plus 2^39 =
660128571397 = ``99 b2 ba a0 05`` on the wire. Fractions show ``fsp`` digits, as the
drainer's values do: DATETIME(3) ``'2024-02-29 10:00:05.500'``.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from tributary.change import SqlValue
from tributary.sources.mysql.numeric import Decoder

_FRAC_BYTES = (0, 1, 1, 2, 2, 3, 3)
_FRAC_SCALE = (0, 10000, 10000, 100, 100, 1, 1)
_DATETIME_OFS = 0x8000000000
_TIME_OFS = 0x800000
_TIME_OFS6 = 0x800000000000


def zone(name: str) -> dt.tzinfo:
    if name.upper() in ("UTC", "+00:00", "Z"):
        return dt.UTC
    if name[:1] in "+-" and ":" in name:
        sign = -1 if name[0] == "-" else 1
        h, m = name[1:].split(":")
        return dt.timezone(sign * dt.timedelta(hours=int(h), minutes=int(m)))
    return zoneinfo.ZoneInfo(name)


def _frac(us: int, fsp: int) -> str:
    return f".{us:06d}"[: fsp + 1] if fsp else ""


def date_decoder(buf: bytes, pos: int) -> tuple[SqlValue, int]:
    v = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
    return f"{v >> 9:04d}-{v >> 5 & 15:02d}-{v & 31:02d}", pos + 3


def _read_frac(buf: bytes, pos: int, fsp: int) -> int:
    n = _FRAC_BYTES[fsp]
    return int.from_bytes(buf[pos : pos + n], "big") * _FRAC_SCALE[fsp] if n else 0


def datetime2_decoder(fsp: int) -> Decoder:
    size = 5 + _FRAC_BYTES[fsp]

    def datetime2(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        v = int.from_bytes(buf[pos : pos + 5], "big") - _DATETIME_OFS
        ymd, hms = v >> 17, v & 0x1FFFF
        ym = ymd >> 5
        text = (
            f"{ym // 13:04d}-{ym % 13:02d}-{ymd & 31:02d} "
            f"{hms >> 12:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}"
        )
        if fsp:
            text += _frac(_read_frac(buf, pos + 5, fsp), fsp)
        return text, pos + size

    return datetime2


def timestamp2_decoder(fsp: int, tz: dt.tzinfo) -> Decoder:
    size = 4 + _FRAC_BYTES[fsp]
    zero = "0000-00-00 00:00:00" + (("." + "0" * fsp) if fsp else "")

    def timestamp2(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        secs = int.from_bytes(buf[pos : pos + 4], "big")
        us = _read_frac(buf, pos + 4, fsp)
        if secs == 0 and us == 0:
            return zero, pos + size
        t = dt.datetime.fromtimestamp(secs, tz)
        return t.strftime("%Y-%m-%d %H:%M:%S") + _frac(us, fsp), pos + size

    return timestamp2


def time2_decoder(fsp: int) -> Decoder:
    size = 3 + _FRAC_BYTES[fsp]

    def time2(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        # MySQL's my_time_packed_from_binary, then unpacked to (sign, h, m, s, us).
        if fsp >= 5:
            packed = int.from_bytes(buf[pos : pos + 6], "big") - _TIME_OFS6
        else:
            intpart = int.from_bytes(buf[pos : pos + 3], "big") - _TIME_OFS
            frac = 0
            if fsp in (1, 2):
                frac = buf[pos + 3]
                if intpart < 0 and frac:
                    intpart, frac = intpart + 1, frac - 0x100
                frac *= 10000
            elif fsp in (3, 4):
                frac = buf[pos + 3] << 8 | buf[pos + 4]
                if intpart < 0 and frac:
                    intpart, frac = intpart + 1, frac - 0x10000
                frac *= 100
            packed = (intpart << 24) + frac
        sign = "-" if packed < 0 else ""
        packed = abs(packed)
        hms, us = packed >> 24, packed & 0xFFFFFF
        text = f"{sign}{hms >> 12 & 0x3FF:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}"
        return text + _frac(us, fsp), pos + size

    return time2


def datetime_v1_decoder(buf: bytes, pos: int) -> tuple[SqlValue, int]:
    """The pre-5.6 DATETIME: YYYYMMDDhhmmss as a little-endian u64."""
    v = int.from_bytes(buf[pos : pos + 8], "little")
    d, t = divmod(v, 1000000)
    text = f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d} "
    return text + f"{t // 10000:02d}:{t // 100 % 100:02d}:{t % 100:02d}", pos + 8


def time_v1_decoder(buf: bytes, pos: int) -> tuple[SqlValue, int]:
    """The pre-5.6 TIME: signed hhmmss in 3 little-endian bytes."""
    v = int.from_bytes(buf[pos : pos + 3], "little", signed=True)
    sign, v = ("-" if v < 0 else ""), abs(v)
    return f"{sign}{v // 10000:02d}:{v // 100 % 100:02d}:{v % 100:02d}", pos + 3


def timestamp_v1_decoder(tz: dt.tzinfo) -> Decoder:
    decode = timestamp2_decoder(0, tz)

    def timestamp(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        secs = int.from_bytes(buf[pos : pos + 4], "little")
        return decode(secs.to_bytes(4, "big"), 0)[0], pos + 4

    return timestamp
