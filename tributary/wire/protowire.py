"""The protobuf wire format's varints, for the hand-written readers (``peek``, ``views``, the
pump client's reply decoder, the pump's binlog merge) and writers (the pump client's requests,
the pump's pull replies). Each reader raises its own error type."""

from __future__ import annotations

UINT64 = 1 << 64
_INT64_SIGN = 1 << 63


def read_varint(buf: bytes, pos: int, end: int, error: type[Exception]) -> tuple[int, int]:
    """(value, position after it) of the varint at ``buf[pos]``; ``error`` if it is truncated,
    longer than 10 bytes or over 64 bits."""
    b = buf[pos] if pos < end else -1
    if 0 <= b < 0x80:  # the common one-byte case
        return b, pos + 1
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
