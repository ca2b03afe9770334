"""Datum codec: EncodeValue / EncodeKey / DecodeOne (util/codec/codec.go, codec_test.go)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.tidbcodec import json_binary
from tributary.tidbcodec.datum import (
    MAX_VALUE,
    MIN_NOT_NULL,
    NULL,
    BytesDatum,
    Datum,
    DecimalDatum,
    DurationDatum,
    FloatDatum,
    IntDatum,
    JsonDatum,
    UintDatum,
    decode_all,
    decode_one,
    encode_key,
    encode_value,
)
from tributary.tidbcodec.errors import DecodeError, EncodeError


def test_flag_bytes_of_each_family() -> None:
    assert encode_value(IntDatum(1), BytesDatum(b"ab")).hex() == "080202046162"
    assert encode_key(IntDatum(1), BytesDatum(b"ab")).hex() == (
        "038000000000000001016162000000000000f9"
    )
    assert encode_value(UintDatum(300)).hex() == "09ac02"
    assert encode_key(UintDatum(300)).hex() == "04000000000000012c"
    assert encode_value(NULL) == b"\x00"
    assert encode_key(MIN_NOT_NULL, MAX_VALUE) == bytes([1, 250])
    assert encode_value(DurationDatum(-1)) == bytes([7]) + bytes.fromhex("7fffffffffffffff")
    assert encode_value(FloatDatum(1.0)) == bytes([5]) + bytes.fromhex("bff0000000000000")
    # decimalFlag, precision, frac, then MyDecimal bin (mydecimal.go ToBin example)
    assert encode_value(DecimalDatum(Decimal("1234567890.1234"), 14, 4)).hex() == (
        "060e04810dfb38d204d2"
    )
    tc, data = json_binary.encode({"a": True})
    assert encode_value(JsonDatum(tc, data)) == bytes([10, tc]) + data


def test_decimal_without_precision_uses_the_value_shape() -> None:
    # EncodeDecimal with precision 0 takes PrecisionAndFrac(): "12.340" -> (5, 3).
    enc = encode_value(DecimalDatum(Decimal("12.340")))
    assert enc[:3] == bytes([6, 5, 3])
    assert decode_one(enc) == (DecimalDatum(Decimal("12.340"), 5, 3), len(enc))


# codec_test.go TestCodecKey: what comes back from both families.
@pytest.mark.parametrize(
    "datums",
    [
        [IntDatum(1)],
        [FloatDatum(1.0), FloatDatum(3.15), BytesDatum(b"123"), BytesDatum(b"123")],
        [UintDatum(1), FloatDatum(3.15), BytesDatum(b"123"), IntDatum(-1)],
        [IntDatum(1), IntDatum(0)],
        [NULL],
        [UintDatum(100), UintDatum(100)],
    ],
)
def test_tidb_codec_key_table(datums: list[Datum]) -> None:
    assert decode_all(encode_key(*datums)) == datums
    assert decode_all(encode_value(*datums)) == datums


# codec_test.go TestCodecKeyCompare rows expressible without types.Time.
KEY_ORDER: list[tuple[list[Datum], list[Datum], int]] = [
    ([IntDatum(1)], [IntDatum(1)], 0),
    ([IntDatum(-1)], [IntDatum(1)], -1),
    ([FloatDatum(3.15)], [FloatDatum(3.12)], 1),
    ([BytesDatum(b"abc")], [BytesDatum(b"abcd")], -1),
    ([BytesDatum(b"abcdefgh")], [BytesDatum(b"abcdefghi")], -1),
    ([IntDatum(1), BytesDatum(b"abc")], [IntDatum(1), BytesDatum(b"abcd")], -1),
    ([BytesDatum(b"\x01\x00"), BytesDatum(b"\xff")], [BytesDatum(b"\x01\x00\xff")], -1),
    (
        [BytesDatum(b"\x01"), UintDatum(0xFFFFFFFFFFFFFFF)],
        [BytesDatum(b"\x01\x10"), IntDatum(0)],
        -1,
    ),
    ([IntDatum(0)], [NULL], 1),
    ([BytesDatum(b"\x00")], [NULL], 1),
    ([FloatDatum(5e-324)], [NULL], 1),
    ([IntDatum(-(1 << 63))], [NULL], 1),
    ([IntDatum(1), IntDatum(-(1 << 63)), NULL], [IntDatum(1), NULL, UintDatum((1 << 64) - 1)], 1),
    ([IntDatum(1), BytesDatum(b""), NULL], [IntDatum(1), NULL, IntDatum(123)], 1),
    ([DurationDatum(0), IntDatum(1)], [DurationDatum(10**9), IntDatum(0)], -1),
    ([MIN_NOT_NULL], [MAX_VALUE], -1),
]


@pytest.mark.parametrize(("left", "right", "want"), KEY_ORDER)
def test_tidb_key_compare_table(left: list[Datum], right: list[Datum], want: int) -> None:
    a, b = encode_key(*left), encode_key(*right)
    assert (a > b) - (a < b) == want


DATUMS = st.one_of(
    st.just(NULL),
    st.builds(IntDatum, st.integers(-(1 << 63), (1 << 63) - 1)),
    st.builds(UintDatum, st.integers(0, (1 << 64) - 1)),
    st.builds(FloatDatum, st.floats(allow_nan=False)),
    st.builds(BytesDatum, st.binary(max_size=40)),
    st.builds(DurationDatum, st.integers(-(1 << 63), (1 << 63) - 1)),
    st.builds(lambda v: DecimalDatum(Decimal(v).scaleb(-4), 30, 4), st.integers(-(10**20), 10**20)),
    st.builds(
        lambda v: JsonDatum(*json_binary.encode(v)),
        st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=3),
    ),
)


@settings(deadline=None)
@given(st.lists(DATUMS, max_size=8))
def test_both_families_round_trip(datums: list[Datum]) -> None:
    assert decode_all(encode_value(*datums)) == datums
    assert decode_all(encode_key(*datums)) == datums


@settings(deadline=None)
@given(st.lists(DATUMS, min_size=1, max_size=4))
def test_decode_one_walks_a_buffer_without_copying_past_it(datums: list[Datum]) -> None:
    buf = encode_value(*datums)
    pos = 0
    for want in datums:
        got, pos = decode_one(buf, pos)
        assert got == want
    assert pos == len(buf)


@pytest.mark.parametrize(
    "bad",
    [b"", b"\x0b", b"\xfa", b"\x03\x00", b"\x08\x80", b"\x02\x06ab", b"\x06\x0e", b"\x0a\x42"],
)
def test_malformed_datums_rejected(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_all(bad) if bad else decode_one(bad)


def test_unencodable_values_rejected() -> None:
    with pytest.raises(EncodeError):
        encode_value(IntDatum(1 << 63))
    with pytest.raises(EncodeError):
        encode_key(UintDatum(-1))
    with pytest.raises(EncodeError):
        encode_value(DecimalDatum(Decimal("123.45"), 4, 2))


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_fail_cleanly(data: bytes) -> None:
    try:
        decode_all(data)
    except DecodeError:
        pass
