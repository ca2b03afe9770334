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
    ``end``; ``error`` if it is truncated, longer than 10 bytes or over 64 bits."""
    if end - pos >= 3:  # values below 2**21 (keys, lengths, column ids) without the loop
        b0 = buf[pos]
        if b0 < 0x80:
            return b0, pos + 1
        b1 = buf[pos + 1]
        if b1 < 0x80:
            return (b0 & 0x7F) | b1 << 7, pos + 2
        b2 = buf[pos + 2]
        if b2 < 0x80:
            return (b0 & 0x7F) | (b1 & 0x7F) << 7 | b2 << 14, pos + 3
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
