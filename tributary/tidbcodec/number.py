"""Integer and float encodings of TiDB's ``util/codec`` (number.go, float.go).

Two families, both bit-exact with TiDB:

* comparable (memcomparable, used in keys and for fixed-width values): 8 bytes
  big-endian; a signed int has its sign bit flipped so that byte order equals
  numeric order; a float maps to a uint64 that sorts the same way;
* compact (used in row values): Go's ``binary.PutVarint`` (zigzag + LEB128) and
  ``binary.PutUvarint``.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so callers walk a
buffer without copying it. Invariant: every encoder rejects values outside the
Go type's range instead of silently wrapping.

Worked example: ``encode_int(-1)`` is ``0xFFFF_FFFF_FFFF_FFFF ^ 1<<63`` =
``7f ff ff ff ff ff ff ff``; ``encode_varint(-1)`` zigzags to 1 and is ``01``;
``encode_varint(64)`` zigzags to 128 and is ``80 01``.
"""

from __future__ import annotations

import math
import struct

from tributary.tidbcodec.errors import DecodeError, EncodeError
from tributary.varint import read_varint, varint

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1
SIGN_MASK = 1 << 63

_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")


def check_int64(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise EncodeError(f"{v} does not fit int64")
    return v


def check_uint64(v: int) -> int:
    if not 0 <= v <= UINT64_MAX:
        raise EncodeError(f"{v} does not fit uint64")
    return v


def _read_u64(buf: bytes, pos: int) -> int:
    if len(buf) - pos < 8:
        raise DecodeError("insufficient bytes to decode value")
    value: int = _U64.unpack_from(buf, pos)[0]
    return value


# -- comparable, fixed 8 bytes -------------------------------------------------


def encode_uint(v: int) -> bytes:
    return _U64.pack(check_uint64(v))


def decode_uint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    return _read_u64(buf, pos), pos + 8


def encode_uint_desc(v: int) -> bytes:
    return _U64.pack(check_uint64(v) ^ UINT64_MAX)


def decode_uint_desc(buf: bytes, pos: int = 0) -> tuple[int, int]:
    return _read_u64(buf, pos) ^ UINT64_MAX, pos + 8


def encode_int(v: int) -> bytes:
    return _U64.pack((check_int64(v) & UINT64_MAX) ^ SIGN_MASK)


def _cmp_uint_to_int(u: int) -> int:
    u ^= SIGN_MASK
    return u - (1 << 64) if u & SIGN_MASK else u


def decode_int(buf: bytes, pos: int = 0) -> tuple[int, int]:
    return _cmp_uint_to_int(_read_u64(buf, pos)), pos + 8


def encode_int_desc(v: int) -> bytes:
    return _U64.pack(((check_int64(v) & UINT64_MAX) ^ SIGN_MASK) ^ UINT64_MAX)


def decode_int_desc(buf: bytes, pos: int = 0) -> tuple[int, int]:
    return _cmp_uint_to_int(_read_u64(buf, pos) ^ UINT64_MAX), pos + 8


def _float_to_cmp_uint(f: float) -> int:
    u: int = _U64.unpack(_F64.pack(f))[0]
    # Go: f >= 0 sets the sign bit, otherwise all bits are inverted. -0.0 >= 0
    # is true, so -0.0 encodes like +0.0 with its own sign bit kept set.
    return u | SIGN_MASK if f >= 0 else u ^ UINT64_MAX


def _cmp_uint_to_float(u: int) -> float:
    u = u & ~SIGN_MASK if u & SIGN_MASK else u ^ UINT64_MAX
    value: float = _F64.unpack(_U64.pack(u))[0]
    return value


def encode_float(f: float) -> bytes:
    if math.isnan(f):
        raise EncodeError("NaN cannot be encoded")
    return _U64.pack(_float_to_cmp_uint(f))


def decode_float(buf: bytes, pos: int = 0) -> tuple[float, int]:
    return _cmp_uint_to_float(_read_u64(buf, pos)), pos + 8


def encode_float_desc(f: float) -> bytes:
    if math.isnan(f):
        raise EncodeError("NaN cannot be encoded")
    return _U64.pack(_float_to_cmp_uint(f) ^ UINT64_MAX)


def decode_float_desc(buf: bytes, pos: int = 0) -> tuple[float, int]:
    return _cmp_uint_to_float(_read_u64(buf, pos) ^ UINT64_MAX), pos + 8


# -- compact: Go varint / uvarint ---------------------------------------------


def encode_uvarint(v: int) -> bytes:
    return varint(check_uint64(v))


def decode_uvarint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    """Go ``binary.Uvarint``: at most 10 bytes, the value below 2**64."""
    return read_varint(buf, pos, len(buf), DecodeError)


def encode_varint(v: int) -> bytes:
    check_int64(v)
    return encode_uvarint(((v << 1) ^ (v >> 63)) & UINT64_MAX)


def decode_varint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    u, pos = decode_uvarint(buf, pos)
    v = u >> 1
    return (~v if u & 1 else v), pos
