"""MyDecimal binary format against types/mydecimal.go (ToBin doc example, TestToBinFromBin)."""

from __future__ import annotations

from decimal import Context, Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.tidbcodec.decimal import (
    decimal_bin_size,
    decode_decimal_bin,
    encode_decimal_bin,
    precision_and_frac,
)
from tributary.tidbcodec.errors import DecodeError, EncodeError


def test_tobin_doc_example() -> None:
    # mydecimal.go ToBin comment: 1234567890.1234 as (14, 4).
    pos = encode_decimal_bin(Decimal("1234567890.1234"), 14, 4)
    neg = encode_decimal_bin(Decimal("-1234567890.1234"), 14, 4)
    assert pos == bytes.fromhex("810DFB38D204D2")
    assert neg == bytes.fromhex("7EF204C72DFB2D")
    assert decode_decimal_bin(pos, 0, 14, 4) == (Decimal("1234567890.1234"), 7)
    assert decode_decimal_bin(neg, 0, 14, 4) == (Decimal("-1234567890.1234"), 7)


# TestToBinFromBin rows without an error: (input, precision, frac, FromBin output string)
EXACT = [
    ("-10.55", 4, 2, "-10.55"),
    ("0.0123456789012345678912345", 30, 25, "0.0123456789012345678912345"),
    ("12345", 5, 0, "12345"),
    ("12345", 10, 3, "12345.000"),
    ("123.45", 10, 3, "123.450"),
    ("-123.45", 20, 10, "-123.4500000000"),
    (".00012345000098765", 22, 20, "0.00012345000098765000"),
    (".12345000098765", 30, 20, "0.12345000098765000000"),
    ("1234500009876.5", 30, 5, "1234500009876.50000"),
    ("000000000.01", 7, 3, "0.010"),
    ("123.4", 10, 2, "123.40"),
    ("0.1", 1, 1, "0.1"),
    ("0.1", 2, 2, "0.10"),
    ("0.10", 3, 3, "0.100"),
    ("0.1", 3, 1, "0.1"),
    ("0.0000000000001234", 32, 17, "0.00000000000012340"),
    ("0.0000000000001234", 20, 20, "0.00000000000012340000"),
]


@pytest.mark.parametrize(("text", "precision", "frac", "out"), EXACT)
def test_tidb_tobin_frombin_table(text: str, precision: int, frac: int, out: str) -> None:
    enc = encode_decimal_bin(Decimal(text), precision, frac)
    assert len(enc) == decimal_bin_size(precision, frac)
    value, end = decode_decimal_bin(enc + b"\xaa", 0, precision, frac)
    assert end == len(enc)
    assert format(value, "f") == out  # exactly frac digits, like MyDecimal.ToString


# Rows where TiDB reports ErrOverflow, or ErrTruncated with non-zero digits lost.
@pytest.mark.parametrize(
    ("text", "precision", "frac"),
    [
        ("111111111.11", 10, 2),
        ("1000", 3, 0),
        (".00012345000098765", 15, 14),
        ("-.000000012345000098765", 30, 20),
    ],
)
def test_overflow_and_lossy_truncation_raise(text: str, precision: int, frac: int) -> None:
    with pytest.raises(EncodeError):
        encode_decimal_bin(Decimal(text), precision, frac)


def test_dropping_only_trailing_zeros_is_exact() -> None:
    # TiDB flags "0.100" as (1,1) ErrTruncated by digit count; the value is exact, we accept it.
    assert decode_decimal_bin(encode_decimal_bin(Decimal("0.100"), 1, 1), 0, 1, 1)[0] == Decimal(
        "0.1"
    )


@pytest.mark.parametrize(("precision", "frac"), [(82, 1), (-1, 1), (10, 31), (10, -1), (3, 4)])
def test_bad_shape_rejected(precision: int, frac: int) -> None:
    # TestToBinFromBin errTests (ErrBadNumber), plus frac > precision.
    with pytest.raises(EncodeError):
        encode_decimal_bin(Decimal(1), precision, frac)


def test_negative_zero_encodes_as_zero() -> None:
    assert encode_decimal_bin(Decimal("-0.00"), 5, 2) == encode_decimal_bin(Decimal(0), 5, 2)
    assert (
        format(decode_decimal_bin(encode_decimal_bin(Decimal("-0"), 5, 2), 0, 5, 2)[0], "f")
        == "0.00"
    )


def test_precision_and_frac_follow_tidb() -> None:
    assert precision_and_frac(Decimal("12.340")) == (5, 3)
    assert precision_and_frac(Decimal("0.0")) == (1, 1)
    assert precision_and_frac(Decimal("0")) == (1, 0)
    assert precision_and_frac(Decimal("-001234")) == (4, 0)
    assert precision_and_frac(Decimal("1E+3")) == (4, 0)


def test_corrupt_bytes_rejected() -> None:
    with pytest.raises(DecodeError):
        decode_decimal_bin(b"\x81", 0, 14, 4)  # truncated
    with pytest.raises(DecodeError):
        decode_decimal_bin(bytes.fromhex("bb9aca00"), 0, 9, 0)  # word 1000000000 > 999999999


@st.composite
def shaped_decimals(draw: st.DrawFn) -> tuple[Decimal, int, int]:
    precision = draw(st.integers(1, 65))
    frac = draw(st.integers(0, min(30, precision)))
    int_digits = draw(st.integers(0, precision - frac))
    whole = draw(st.integers(0, 10**int_digits - 1))
    part = draw(st.integers(0, 10**frac - 1))
    sign = draw(st.sampled_from(["", "-"]))
    text = f"{sign}{whole}.{part:0{frac}d}" if frac else f"{sign}{whole}"
    return Decimal(text), precision, frac


@settings(deadline=None)
@given(shaped_decimals())
def test_round_trip_is_exact(case: tuple[Decimal, int, int]) -> None:
    value, precision, frac = case
    enc = encode_decimal_bin(value, precision, frac)
    got, _ = decode_decimal_bin(enc, 0, precision, frac)
    assert got == value
    assert got.as_tuple().exponent == -frac


@settings(deadline=None)
@given(shaped_decimals(), st.data())
def test_same_shape_encodings_sort_numerically(
    case: tuple[Decimal, int, int], data: st.DataObject
) -> None:
    a, precision, frac = case
    digits = precision - frac
    other = data.draw(st.integers(-(10**precision) + 1, 10**precision - 1))
    b = Decimal(other).scaleb(-frac, context=Context(prec=100))
    assert len(str(abs(int(b)))) <= max(digits, 1)
    ea, eb = encode_decimal_bin(a, precision, frac), encode_decimal_bin(b, precision, frac)
    assert (ea < eb) == (a < b)
    assert (ea == eb) == (a == b)
