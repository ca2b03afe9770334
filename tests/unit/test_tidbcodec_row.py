"""Old row format and binlog row layouts (tablecodec EncodeOldRow/DecodeRowWithMap,
tables.go addInsertBinlog/addUpdateBinlog/addDeleteBinlog, drainer DecodeOldAndNewRow)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.tidbcodec.datum import (
    NULL,
    BytesDatum,
    Datum,
    DecimalDatum,
    FloatDatum,
    IntDatum,
    UintDatum,
    encode_value,
)
from tributary.tidbcodec.errors import DecodeError
from tributary.tidbcodec.row import (
    EXTRA_HANDLE_ID,
    decode_deleted_row,
    decode_inserted_row,
    decode_old_row,
    decode_updated_row,
    encode_deleted_row,
    encode_inserted_row,
    encode_old_row,
    encode_updated_row,
)


def test_old_row_bytes() -> None:
    row = encode_old_row([(1, IntDatum(100)), (2, BytesDatum(b"abc"))])
    assert row.hex() == "080208c80108040206616263"
    assert decode_old_row(row) == {1: IntDatum(100), 2: BytesDatum(b"abc")}


def test_row_is_column_id_then_encode_value_of_each_column() -> None:
    # tablecodec_test.go TestCutRow: every value slice equals EncodeValue(value).
    values: list[Datum] = [IntDatum(100), BytesDatum(b"abc"), DecimalDatum(Decimal(1))]
    row = encode_old_row(zip([1, 2, 3], values, strict=True))
    pairs = zip([1, 2, 3], values, strict=True)
    expected = b"".join(encode_value(IntDatum(i)) + encode_value(v) for i, v in pairs)
    assert row == expected


def test_empty_row_is_one_nil_flag() -> None:
    # TestRowCodec: "Make sure empty row return not nil value" -> len 1.
    assert encode_old_row([]) == b"\x00"
    assert decode_old_row(b"\x00") == {}
    assert decode_old_row(b"") == {}


def test_inserted_row_int_handle() -> None:
    data = encode_inserted_row([IntDatum(5)], [(2, BytesDatum(b"x")), (3, NULL)])
    assert data[:2] == bytes.fromhex("080a")  # EncodeValue(NewIntDatum(handle))
    handle, cols = decode_inserted_row(data)
    assert handle == [IntDatum(5)]
    assert cols == {2: BytesDatum(b"x"), 3: NULL}


def test_inserted_row_with_only_the_handle_column() -> None:
    data = encode_inserted_row([IntDatum(-7)], [])
    assert data == encode_value(IntDatum(-7)) + b"\x00"
    assert decode_inserted_row(data) == ([IntDatum(-7)], {})


def test_inserted_row_common_handle() -> None:
    handle: list[Datum] = [BytesDatum(b"k1"), UintDatum(9)]
    data = encode_inserted_row(
        handle, [(1, BytesDatum(b"k1")), (2, UintDatum(9)), (3, IntDatum(1))]
    )
    got_handle, cols = decode_inserted_row(data, handle_cols=2)
    assert got_handle == handle
    assert cols[3] == IntDatum(1)


def test_updated_row_first_occurrence_is_old() -> None:
    old: list[tuple[int, Datum]] = [(1, IntDatum(1)), (2, BytesDatum(b"before"))]
    new: list[tuple[int, Datum]] = [(1, IntDatum(1)), (2, BytesDatum(b"after"))]
    data = encode_updated_row(old, new)
    assert data == encode_old_row(old) + encode_old_row(new)
    assert decode_updated_row(data) == (dict(old), dict(new))


def test_deleted_row_carries_the_hidden_rowid() -> None:
    cols: list[tuple[int, Datum]] = [(1, BytesDatum(b"v")), (EXTRA_HANDLE_ID, IntDatum(42))]
    data = encode_deleted_row(cols)
    assert data.startswith(encode_value(IntDatum(1)))
    assert decode_deleted_row(data) == {1: BytesDatum(b"v"), -1: IntDatum(42)}


@pytest.mark.parametrize(
    "bad",
    [
        encode_value(IntDatum(1)),  # column ID without value
        encode_value(BytesDatum(b"id"), IntDatum(1)),  # column ID not an int
        encode_value(IntDatum(1), IntDatum(2), IntDatum(1), IntDatum(3)),  # repeated column
        bytes([128, 0, 1, 1, 0, 0]),  # new row format
        b"\x08\x02\x08",  # truncated value
    ],
)
def test_corrupt_old_rows_rejected(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_old_row(bad)


@pytest.mark.parametrize(
    "bad",
    [
        encode_old_row([(1, IntDatum(1)), (2, IntDatum(2))]) + encode_old_row([(1, IntDatum(3))]),
        encode_old_row([(1, IntDatum(1))]) * 3,
        b"\x00" + encode_old_row([(1, IntDatum(1))]),
    ],
)
def test_corrupt_updated_rows_rejected(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_updated_row(bad)


def test_empty_update_decodes_empty() -> None:
    assert decode_updated_row(encode_updated_row([], [])) == ({}, {})


VALUES = st.one_of(
    st.just(NULL),
    st.builds(IntDatum, st.integers(-(1 << 63), (1 << 63) - 1)),
    st.builds(UintDatum, st.integers(0, (1 << 64) - 1)),
    st.builds(FloatDatum, st.floats(allow_nan=False)),
    st.builds(BytesDatum, st.binary(max_size=30)),
)
ROWS = st.dictionaries(st.integers(-1, 5000), VALUES, max_size=12)


@settings(deadline=None)
@given(ROWS)
def test_old_row_round_trip(row: dict[int, Datum]) -> None:
    assert decode_old_row(encode_old_row(row.items())) == row


@settings(deadline=None)
@given(ROWS, st.data())
def test_updated_row_round_trip(old: dict[int, Datum], data: st.DataObject) -> None:
    new = {col: data.draw(VALUES) for col in old}
    assert decode_updated_row(encode_updated_row(old.items(), new.items())) == (old, new)


@settings(deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=3), ROWS)
def test_inserted_row_round_trip(handle: list[Datum], row: dict[int, Datum]) -> None:
    data = encode_inserted_row(handle, row.items())
    assert decode_inserted_row(data, handle_cols=len(handle)) == (handle, row)


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_fail_cleanly(data: bytes) -> None:
    for decode in (decode_old_row, decode_updated_row, decode_inserted_row):
        try:
            decode(data)
        except DecodeError:
            pass
