"""Datums and TiDB's datum codec (``util/codec/codec.go`` EncodeValue/EncodeKey/DecodeOne).

A datum is one flag byte followed by its payload:

====  ==================  ==============================================
flag  name                payload
====  ==================  ==============================================
0     NilFlag             nothing (SQL NULL)
1     bytesFlag           memcomparable groups (keys)
2     compactBytesFlag    varint length + bytes (values)
3     intFlag             8-byte sign-flipped big endian (keys)
4     uintFlag            8-byte big endian (keys)
5     floatFlag           8-byte comparable float (both)
6     decimalFlag         precision, frac, MyDecimal binary (both)
7     durationFlag        intFlag payload of nanoseconds (both)
8     varintFlag          Go varint (values)
9     uvarintFlag         Go uvarint (values)
10    jsonFlag            JSON type code + binary JSON (both)
250   maxFlag             nothing (key upper bound)
====  ==================  ==============================================

Example: ``encode_value(IntDatum(1), BytesDatum(b"ab"))`` is
``08 02 | 02 04 61 62``; ``encode_key`` of the same is
``03 80 00 00 00 00 00 00 01 | 01 61 62 00 00 00 00 00 00 f9``.

The datums here are the *flattened* kinds a row holds: times are already
packed uints and durations int64 nanoseconds (see :mod:`tidbcodec.convert`).
Invariant: ``decode_one`` accepts everything either encoder produces, and
rejects unknown flags and truncated payloads with :class:`DecodeError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TypeAlias

from tributary.tidbcodec import bytes_, number
from tributary.tidbcodec.decimal import (
    MAX_FRAC,
    decode_decimal_bin,
    encode_decimal_bin,
    precision_and_frac,
)
from tributary.tidbcodec.errors import DecodeError, EncodeError
from tributary.tidbcodec.json_binary import peek_size

NIL_FLAG = 0
BYTES_FLAG = 1
COMPACT_BYTES_FLAG = 2
INT_FLAG = 3
UINT_FLAG = 4
FLOAT_FLAG = 5
DECIMAL_FLAG = 6
DURATION_FLAG = 7
VARINT_FLAG = 8
UVARINT_FLAG = 9
JSON_FLAG = 10
MAX_FLAG = 250


@dataclass(frozen=True, slots=True)
class NullDatum:
    """SQL NULL."""


@dataclass(frozen=True, slots=True)
class IntDatum:
    value: int


@dataclass(frozen=True, slots=True)
class UintDatum:
    value: int


@dataclass(frozen=True, slots=True)
class FloatDatum:
    value: float


@dataclass(frozen=True, slots=True)
class BytesDatum:
    value: bytes


@dataclass(frozen=True, slots=True)
class DecimalDatum:
    """A decimal with the column's (precision, frac); precision 0 means "from the value"."""

    value: Decimal
    precision: int = 0
    frac: int = 0


@dataclass(frozen=True, slots=True)
class DurationDatum:
    """An unflattened TIME in nanoseconds (rows store durations as IntDatum)."""

    nanos: int


@dataclass(frozen=True, slots=True)
class JsonDatum:
    """A binary JSON document: its type code and value bytes."""

    type_code: int
    data: bytes


@dataclass(frozen=True, slots=True)
class MinNotNullDatum:
    """Key lower bound above NULL (encodes as a lone bytesFlag)."""


@dataclass(frozen=True, slots=True)
class MaxValueDatum:
    """Key upper bound (encodes as maxFlag)."""


NULL = NullDatum()
MIN_NOT_NULL = MinNotNullDatum()
MAX_VALUE = MaxValueDatum()

Datum: TypeAlias = (
    NullDatum
    | IntDatum
    | UintDatum
    | FloatDatum
    | BytesDatum
    | DecimalDatum
    | DurationDatum
    | JsonDatum
    | MinNotNullDatum
    | MaxValueDatum
)


def _encode_decimal(d: DecimalDatum) -> bytes:
    precision, frac = d.precision, d.frac
    if precision == 0:
        precision, frac = precision_and_frac(d.value)
    frac = min(frac, MAX_FRAC)
    return bytes((DECIMAL_FLAG, precision, frac)) + encode_decimal_bin(d.value, precision, frac)


def encode_datum(d: Datum, comparable: bool) -> bytes:
    """One datum; ``comparable`` selects the key (EncodeKey) family."""
    if isinstance(d, IntDatum):
        if comparable:
            return bytes((INT_FLAG,)) + number.encode_int(d.value)
        return bytes((VARINT_FLAG,)) + number.encode_varint(d.value)
    if isinstance(d, UintDatum):
        if comparable:
            return bytes((UINT_FLAG,)) + number.encode_uint(d.value)
        return bytes((UVARINT_FLAG,)) + number.encode_uvarint(d.value)
    if isinstance(d, BytesDatum):
        if comparable:
            return bytes((BYTES_FLAG,)) + bytes_.encode_bytes(d.value)
        return bytes((COMPACT_BYTES_FLAG,)) + bytes_.encode_compact_bytes(d.value)
    if isinstance(d, NullDatum):
        return bytes((NIL_FLAG,))
    if isinstance(d, FloatDatum):
        return bytes((FLOAT_FLAG,)) + number.encode_float(d.value)
    if isinstance(d, DecimalDatum):
        return _encode_decimal(d)
    if isinstance(d, DurationDatum):
        return bytes((DURATION_FLAG,)) + number.encode_int(d.nanos)
    if isinstance(d, JsonDatum):
        return bytes((JSON_FLAG, d.type_code)) + d.data
    if isinstance(d, MinNotNullDatum):
        return bytes((BYTES_FLAG,))
    if isinstance(d, MaxValueDatum):
        return bytes((MAX_FLAG,))
    raise EncodeError(f"cannot encode {d!r}")


def encode_value(*datums: Datum) -> bytes:
    """TiDB's ``codec.EncodeValue``: compact, not order preserving (row values)."""
    return b"".join(encode_datum(d, False) for d in datums)


def encode_key(*datums: Datum) -> bytes:
    """TiDB's ``codec.EncodeKey``: memcomparable (index and handle keys)."""
    return b"".join(encode_datum(d, True) for d in datums)


def decode_one(buf: bytes, pos: int = 0) -> tuple[Datum, int]:
    """Decode the datum at ``pos``; returns it and the position after it."""
    if pos >= len(buf):
        raise DecodeError("invalid encoded datum: no bytes left")
    flag = buf[pos]
    pos += 1
    if flag == VARINT_FLAG:
        i, pos = number.decode_varint(buf, pos)
        return IntDatum(i), pos
    if flag == COMPACT_BYTES_FLAG:
        b, pos = bytes_.decode_compact_bytes(buf, pos)
        return BytesDatum(b), pos
    if flag == UVARINT_FLAG:
        u, pos = number.decode_uvarint(buf, pos)
        return UintDatum(u), pos
    if flag == NIL_FLAG:
        return NULL, pos
    if flag == INT_FLAG:
        i, pos = number.decode_int(buf, pos)
        return IntDatum(i), pos
    if flag == UINT_FLAG:
        u, pos = number.decode_uint(buf, pos)
        return UintDatum(u), pos
    if flag == BYTES_FLAG:
        b, pos = bytes_.decode_bytes(buf, pos)
        return BytesDatum(b), pos
    return _decode_rare(flag, buf, pos)


def _decode_rare(flag: int, buf: bytes, pos: int) -> tuple[Datum, int]:
    if flag == FLOAT_FLAG:
        f, pos = number.decode_float(buf, pos)
        return FloatDatum(f), pos
    if flag == DECIMAL_FLAG:
        if len(buf) - pos < 3:
            raise DecodeError("insufficient bytes to decode decimal")
        precision, frac = buf[pos], buf[pos + 1]
        value, pos = decode_decimal_bin(buf, pos + 2, precision, frac)
        return DecimalDatum(value, precision, frac), pos
    if flag == DURATION_FLAG:
        nanos, pos = number.decode_int(buf, pos)
        return DurationDatum(nanos), pos
    if flag == JSON_FLAG:
        size = peek_size(buf, pos)
        if len(buf) - pos < size:
            raise DecodeError("insufficient bytes to decode JSON")
        return JsonDatum(buf[pos], bytes(buf[pos + 1 : pos + size])), pos + size
    raise DecodeError(f"invalid encoded datum flag {flag}")


def decode_all(buf: bytes) -> list[Datum]:
    """Decode a whole buffer of concatenated datums."""
    out: list[Datum] = []
    pos = 0
    while pos < len(buf):
        d, pos = decode_one(buf, pos)
        out.append(d)
    return out
