"""Decoders of numeric row-image values: integers, FLOAT/DOUBLE, DECIMAL, BIT, YEAR.

A decoder is ``f(buf, pos) -> (value, next pos)``; it trusts the event's length (a short
event raises IndexError or struct.error, which the rows decoder reports as MalformedEvent).

DECIMAL(p, s) is MySQL's binary format: the integer and fraction digits in groups of nine
(4 bytes each, big-endian), a leading/trailing partial group in 1-4 bytes, the whole value
with its sign bit flipped and, when negative, every bit inverted. Worked example, DECIMAL(5,2)
= -123.45: 3 integer digits -> 2 bytes, 2 fraction digits -> 1 byte; +123.45 is
``80 7b 2d`` (0x807b = sign bit + 123, 0x2d = 45); negated bitwise: ``7f 84 d2``. Decoding
``7f 84 d2``: sign bit 0 -> negative, invert -> ``80 7b 2d``, clear the sign bit -> 123 and
45 -> ``'-123.45'`` (the text keeps the column's scale, as the drainer's values do).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from tributary.change import SqlValue

Decoder = Callable[[bytes, int], tuple[SqlValue, int]]

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_INTS = {
    (1, False): struct.Struct("<b"),
    (1, True): struct.Struct("<B"),
    (2, False): struct.Struct("<h"),
    (2, True): struct.Struct("<H"),
    (4, False): struct.Struct("<i"),
    (4, True): struct.Struct("<I"),
    (8, False): struct.Struct("<q"),
    (8, True): struct.Struct("<Q"),
}
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


def int_decoder(size: int, unsigned: bool) -> Decoder:
    if size == 3:

        def int24(buf: bytes, pos: int) -> tuple[SqlValue, int]:
            return int.from_bytes(buf[pos : pos + 3], "little", signed=not unsigned), pos + 3

        return int24
    unpack = _INTS[size, unsigned].unpack_from

    def integer(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        return unpack(buf, pos)[0], pos + size

    return integer


def float_decoder(buf: bytes, pos: int) -> tuple[SqlValue, int]:
    # FLOAT is single precision: shown with the 7 significant digits MySQL prints.
    return float(f"{_F32.unpack_from(buf, pos)[0]:.7g}"), pos + 4


def double_decoder(buf: bytes, pos: int) -> tuple[SqlValue, int]:
    return _F64.unpack_from(buf, pos)[0], pos + 8


def year_decoder(buf: bytes, pos: int) -> tuple[SqlValue, int]:
    y = buf[pos]
    return (1900 + y if y else 0), pos + 1


def bit_decoder(meta: int) -> Decoder:
    size = (meta & 0xFF) + (1 if meta >> 8 else 0)

    def bit(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        return int.from_bytes(buf[pos : pos + size], "big"), pos + size

    return bit


def decimal_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decimal_decoder(precision: int, scale: int) -> Decoder:
    intg = precision - scale
    lead = _DIG2BYTES[intg % 9]
    full_int = intg // 9
    full_frac = scale // 9
    trail_digits = scale % 9
    trail = _DIG2BYTES[trail_digits]
    size = decimal_size(precision, scale)

    def dec(buf: bytes, pos: int) -> tuple[SqlValue, int]:
        raw = bytearray(buf[pos : pos + size])
        negative = not raw[0] & 0x80
        raw[0] ^= 0x80
        if negative:
            raw = bytearray(b ^ 0xFF for b in raw)
        p = 0
        digits = []
        if lead:
            digits.append(str(int.from_bytes(raw[:lead], "big")))
            p = lead
        for _ in range(full_int):
            digits.append(f"{int.from_bytes(raw[p : p + 4], 'big'):09d}")
            p += 4
        whole = "".join(digits).lstrip("0") or "0"
        if scale:
            frac = []
            for _ in range(full_frac):
                frac.append(f"{int.from_bytes(raw[p : p + 4], 'big'):09d}")
                p += 4
            if trail:
                frac.append(f"{int.from_bytes(raw[p : p + trail], 'big'):0{trail_digits}d}")
            whole = f"{whole}.{''.join(frac)}"
        return ("-" + whole if negative else whole), pos + size

    return dec
