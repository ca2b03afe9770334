"""Byte-string encodings of TiDB's ``util/codec/bytes.go``.

* memcomparable group encoding (keys): the data is cut into 8-byte groups, the
  last one padded with zeros, each followed by a marker ``0xFF - pad_count``.
  Example: ``b"\\x01\\x02\\x03"`` -> ``01 02 03 00 00 00 00 00 fa``; an exact
  multiple of 8 gets one more all-padding group ending in ``f7``. The
  descending form is the same bytes bit-inverted.
* compact encoding (row values): Go varint length, then the raw bytes.

Invariant: decoding checks every marker and padding byte, so a truncated or
corrupt key is rejected rather than misread.
"""

from __future__ import annotations

from tributary.tidbcodec.errors import DecodeError
from tributary.tidbcodec.number import decode_varint, encode_varint

GROUP_SIZE = 8
MARKER = 0xFF
_PADS = bytes(GROUP_SIZE)
_INVERT = bytes(range(255, -1, -1))


def encode_bytes(data: bytes) -> bytes:
    out = bytearray()
    n = len(data)
    for idx in range(0, n + 1, GROUP_SIZE):
        remain = n - idx
        if remain >= GROUP_SIZE:
            out += data[idx : idx + GROUP_SIZE]
            out.append(MARKER)
        else:
            pad = GROUP_SIZE - remain
            out += data[idx:]
            out += _PADS[:pad]
            out.append(MARKER - pad)
    return bytes(out)


def encode_bytes_desc(data: bytes) -> bytes:
    return encode_bytes(data).translate(_INVERT)


def encoded_bytes_length(n: int) -> int:
    return (n // GROUP_SIZE + 1) * (GROUP_SIZE + 1)


def _decode_groups(buf: bytes, pos: int, reverse: bool) -> tuple[bytes, int]:
    out = bytearray()
    pad_byte = MARKER if reverse else 0
    while True:
        if len(buf) - pos < GROUP_SIZE + 1:
            raise DecodeError("insufficient bytes to decode value")
        marker = buf[pos + GROUP_SIZE]
        pad = marker if reverse else MARKER - marker
        if pad > GROUP_SIZE:
            raise DecodeError(f"invalid marker byte {marker:#x}")
        real = GROUP_SIZE - pad
        out += buf[pos : pos + real]
        if pad:
            if any(b != pad_byte for b in buf[pos + real : pos + GROUP_SIZE]):
                raise DecodeError("invalid padding byte")
            pos += GROUP_SIZE + 1
            break
        pos += GROUP_SIZE + 1
    if reverse:
        return bytes(out).translate(_INVERT), pos
    return bytes(out), pos


def decode_bytes(buf: bytes, pos: int = 0) -> tuple[bytes, int]:
    return _decode_groups(buf, pos, reverse=False)


def decode_bytes_desc(buf: bytes, pos: int = 0) -> tuple[bytes, int]:
    return _decode_groups(buf, pos, reverse=True)


def encode_compact_bytes(data: bytes) -> bytes:
    return encode_varint(len(data)) + data


def decode_compact_bytes(buf: bytes, pos: int = 0) -> tuple[bytes, int]:
    n, pos = decode_varint(buf, pos)
    if n < 0 or len(buf) - pos < n:
        raise DecodeError(f"insufficient bytes to decode value, expected length {n}")
    return bytes(buf[pos : pos + n]), pos + n
