"""Base-128 varints (LEB128, as protobuf and Go's ``binary.Uvarint`` write them): the one
reader and writer, for the protobuf wire readers and writers (``tributary.wire``, the pump
client's codec, the pump's pull replies and binlog merge) and the TiDB codec.

Invariant: ``read_varint`` accepts exactly what Go's ``binary.Uvarint`` accepts (at most 10
bytes, the value below 2**64) and raises the caller's own error type otherwise, so each reader
keeps its error root; it imports nothing, so the TiDB codec, which stands alone, can use it.

Worked example: 300 = 0b10_0101100 is written low group first, ``ac 02`` (0x2c | 0x80, 0x02);
-1 is written as its 64-bit two's complement, ten bytes ``ff ff ff ff ff ff ff ff ff 01``.
"""

from __future__ import annotations

UINT64 = 1 << 64
_INT64_SIGN = 1 << 63


def read_varint(buf: bytes, pos: int, end: int, error: type[Exception]) -> tuple[int, int]:
    """(value, position after it) of the varint at ``buf[pos]``, reading no further than
    ``end``; ``error`` if it is truncated, longer than 10 bytes or over 64 bits.

    Varints of up to nine bytes are read without a loop when that many bytes are left (keys,
    lengths and ids take one to three; a TSO timestamp, about 2**58, takes nine)."""
    n = end - pos
    if n >= 3:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        r = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            return r | b << 7, pos + 2
        r |= (b & 0x7F) << 7
        b = buf[pos + 2]
        if b < 0x80:
            return r | b << 14, pos + 3
        if n >= 9:
            r |= (b & 0x7F) << 14
            b = buf[pos + 3]
            if b < 0x80:
                return r | b << 21, pos + 4
            r |= (b & 0x7F) << 21
            b = buf[pos + 4]
            if b < 0x80:
                return r | b << 28, pos + 5
            r |= (b & 0x7F) << 28
            b = buf[pos + 5]
            if b < 0x80:
                return r | b << 35, pos + 6
            r |= (b & 0x7F) << 35
            b = buf[pos + 6]
            if b < 0x80:
                return r | b << 42, pos + 7
            r |= (b & 0x7F) << 42
            b = buf[pos + 7]
            if b < 0x80:
                return r | b << 49, pos + 8
            r |= (b & 0x7F) << 49
            b = buf[pos + 8]
            if b < 0x80:
                return r | b << 56, pos + 9
    return _read_loop(buf, pos, end, error)


def _read_loop(buf: bytes, pos: int, end: int, error: type[Exception]) -> tuple[int, int]:
    """``read_varint`` a byte at a time: near the end of ``buf``, and for ten-byte varints."""
    result = shift = 0
    while True:
        if pos >= end:
            raise error("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >= UINT64:
                raise error("varint overflows 64 bits")
            return result, pos
        shift += 7
        if shift >= 70:
            raise error("varint too long")


def varint(value: int) -> bytes:
    """Base-128 varint; negative values are written as 64-bit two's complement."""
    if value < 0:
        value += UINT64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def int64(v: int) -> int:
    """A varint's value read as a signed 64-bit integer (two's complement)."""
    return v - UINT64 if v & _INT64_SIGN else v
