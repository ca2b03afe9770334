"""Integer/float codecs against TiDB's util/codec vectors and properties.

Vectors: tablecodec_test.go TestCutPrefix (EncodeInt(666)), codec_test.go
TestNumberCodec / TestNumberOrder / TestFloatCodec value tables, and Go's
encoding/binary varint format (zigzag + LEB128).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.tidbcodec import number as n
from tributary.tidbcodec.errors import DecodeError, EncodeError

I64 = st.integers(n.INT64_MIN, n.INT64_MAX)
U64 = st.integers(0, n.UINT64_MAX)

INT_TABLE = [
    n.INT64_MIN,
    -(1 << 31),
    -(1 << 15),
    -(1 << 7),
    0,
    127,
    32767,
    (1 << 31) - 1,
    n.INT64_MAX,
    (1 << 47) - 1,
    -(1 << 47),
    (1 << 23) - 1,
    -(1 << 23),
    (1 << 33) - 1,
    -(1 << 33),
    (1 << 55) - 1,
    -(1 << 55),
    1,
    -1,
]
UINT_TABLE = [
    0,
    255,
    65535,
    (1 << 32) - 1,
    n.UINT64_MAX,
    (1 << 24) - 1,
    (1 << 48) - 1,
    (1 << 56) - 1,
    1,
    32767,
    127,
    (1 << 31) - 1,
    n.INT64_MAX,
]


def test_encode_int_matches_tidb_key_vector() -> None:
    # tablecodec_test.go TestCutPrefix: the index ID 666 in a key.
    assert n.encode_int(666) == bytes([0x80, 0, 0, 0, 0, 0, 0x02, 0x9A])
    assert n.encode_int(-1) == bytes.fromhex("7fffffffffffffff")
    assert n.encode_uint(1) == bytes.fromhex("0000000000000001")


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (1, "02"),
        (-1, "01"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (n.INT64_MAX, "feffffffffffffffff01"),
        (n.INT64_MIN, "ffffffffffffffffff01"),
    ],
)
def test_varint_vectors(value: int, encoded: str) -> None:
    assert n.encode_varint(value).hex() == encoded
    assert n.decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (127, "7f"), (128, "8001"), (300, "ac02"), (n.UINT64_MAX, "ffffffffffffffffff01")],
)
def test_uvarint_vectors(value: int, encoded: str) -> None:
    assert n.encode_uvarint(value).hex() == encoded
    assert n.decode_uvarint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


@pytest.mark.parametrize("v", INT_TABLE)
def test_int_table_round_trips_every_family(v: int) -> None:
    assert n.decode_int(n.encode_int(v)) == (v, 8)
    assert n.decode_int_desc(n.encode_int_desc(v)) == (v, 8)
    assert n.decode_varint(n.encode_varint(v))[0] == v


@pytest.mark.parametrize("v", UINT_TABLE)
def test_uint_table_round_trips_every_family(v: int) -> None:
    assert n.decode_uint(n.encode_uint(v)) == (v, 8)
    assert n.decode_uint_desc(n.encode_uint_desc(v)) == (v, 8)
    assert n.decode_uvarint(n.encode_uvarint(v))[0] == v


@settings(deadline=None)
@given(I64, I64)
def test_comparable_int_preserves_order(a: int, b: int) -> None:
    assert (n.encode_int(a) < n.encode_int(b)) == (a < b)
    assert (n.encode_int_desc(a) < n.encode_int_desc(b)) == (a > b)


@settings(deadline=None)
@given(U64, U64)
def test_comparable_uint_preserves_order(a: int, b: int) -> None:
    assert (n.encode_uint(a) < n.encode_uint(b)) == (a < b)
    assert (n.encode_uint_desc(a) < n.encode_uint_desc(b)) == (a > b)


@settings(deadline=None)
@given(I64)
def test_varint_round_trip(v: int) -> None:
    data = n.encode_varint(v) + b"tail"
    assert n.decode_varint(data, 0) == (v, len(data) - 4)


@settings(deadline=None)
@given(U64)
def test_uvarint_round_trip(v: int) -> None:
    assert n.decode_uvarint(n.encode_uvarint(v)) == (v, len(n.encode_uvarint(v)))


FLOATS = [
    -1.0,
    0.0,
    1.0,
    1.7976931348623157e308,
    3.4028234663852886e38,
    1.401298464324817e-45,
    5e-324,
    -math.inf,
    math.inf,
]


@pytest.mark.parametrize("f", FLOATS)
def test_float_table_round_trips(f: float) -> None:
    assert n.decode_float(n.encode_float(f))[0] == f
    assert n.decode_float_desc(n.encode_float_desc(f))[0] == f


@settings(deadline=None)
@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_comparable_float_preserves_order(a: float, b: float) -> None:
    if a == b:  # 0.0 and -0.0 are equal but keep distinct bit patterns
        return
    assert (n.encode_float(a) < n.encode_float(b)) == (a < b)
    assert (n.encode_float_desc(a) < n.encode_float_desc(b)) == (a > b)


def test_out_of_range_and_truncated_input_are_rejected() -> None:
    with pytest.raises(EncodeError):
        n.encode_int(n.INT64_MAX + 1)
    with pytest.raises(EncodeError):
        n.encode_uvarint(-1)
    with pytest.raises(EncodeError):
        n.encode_float(math.nan)
    with pytest.raises(DecodeError):
        n.decode_int(b"\x80\x00")
    with pytest.raises(DecodeError):
        n.decode_uvarint(b"\x80\x80")  # continuation bit on the last byte
    with pytest.raises(DecodeError):
        n.decode_uvarint(b"\xff" * 9 + b"\x02")  # 10th byte > 1 overflows 64 bits
