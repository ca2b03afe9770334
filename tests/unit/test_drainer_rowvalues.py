"""The drainer's compiled row decoder sends exactly what ``sql_value`` gives for every column
type, through its int/str shortcuts and around them."""

from __future__ import annotations

import datetime as dt

import pytest

from services.drainer.rowvalues import Column, row_decoder, sql_value
from tests.support.drainer_binlogs import CST, TYPES, TYPES_ROW, TYPES_SENT, cols_of
from tributary.tidbcodec import (
    NULL,
    BytesDatum,
    ColumnType,
    Datum,
    DecodeError,
    FloatDatum,
    IntDatum,
    UintDatum,
    decode_deleted_row,
    encode_deleted_row,
    encode_inserted_row,
    encode_key,
    encode_updated_row,
)
from tributary.tidbcodec import mysqltypes as mt

COLUMNS: list[Column] = [(c.id, c.name, c.ft) for c in TYPES.columns]
FT = {c.id: c.ft for c in TYPES.columns}
NAME = {c.id: c.name for c in TYPES.columns}


def reference(data: bytes, tz: dt.tzinfo) -> dict[str, object]:
    cols = decode_deleted_row(data)
    return {NAME[i]: sql_value(cols[i], NAME[i], FT[i], tz) for i in NAME if i in cols}


@pytest.mark.parametrize("tz", [dt.UTC, CST])
def test_every_type_decodes_as_sql_value_gives(tz: dt.tzinfo) -> None:
    data = encode_deleted_row(cols_of(TYPES, TYPES_ROW))
    got = row_decoder(COLUMNS, [], tz).deleted(data)
    assert got == reference(data, tz)
    if tz is CST:
        assert got == TYPES_SENT


def test_nulls_and_updates_of_every_type() -> None:
    nulls = [(i, NULL) for i in NAME]
    decoder = row_decoder(COLUMNS, [], CST)
    old, new = decoder.updated(encode_updated_row(cols_of(TYPES, TYPES_ROW), nulls))
    assert old == TYPES_SENT
    assert new == dict.fromkeys(NAME.values())


STRING = ColumnType(mt.TYPE_VARCHAR, charset="utf8mb4")
GBK = ColumnType(mt.TYPE_VARCHAR, charset="gbk")
UNSIGNED = ColumnType(mt.TYPE_LONGLONG, flag=mt.UNSIGNED_FLAG)
BIT = ColumnType(mt.TYPE_BIT, flen=64)
YEAR = ColumnType(mt.TYPE_YEAR)
SIGNED = ColumnType(mt.TYPE_LONG)
FLOAT = ColumnType(mt.TYPE_FLOAT)


@pytest.mark.parametrize(
    ("ft", "datum"),
    [
        (STRING, BytesDatum("ünï".encode())),
        (STRING, BytesDatum(b"\xff\xfe not utf-8")),  # kept through surrogateescape
        (GBK, BytesDatum("中文".encode("gbk"))),
        (ColumnType(mt.TYPE_BLOB, charset="binary"), BytesDatum(b"\x00\x01")),
        (ColumnType(mt.TYPE_STRING, flag=mt.BINARY_FLAG), BytesDatum(b"\x80")),
        (UNSIGNED, IntDatum(-1)),  # an int handle read into an unsigned column wraps
        (UNSIGNED, UintDatum((1 << 64) - 1)),
        (BIT, IntDatum(-2)),
        (YEAR, IntDatum(2024)),
        (SIGNED, IntDatum(-(1 << 31))),
        (SIGNED, UintDatum(7)),
        (FLOAT, FloatDatum(0.1)),
        (ColumnType(mt.TYPE_ENUM, elems=("a", "b")), UintDatum(2)),
        (ColumnType(mt.TYPE_SET, elems=("a", "b")), IntDatum(3)),
        (ColumnType(mt.TYPE_DATETIME, decimal=6), UintDatum(0)),
        (ColumnType(mt.TYPE_DURATION), IntDatum(-1_000_000_000)),
        (ColumnType(mt.TYPE_GEOMETRY), BytesDatum(b"geo")),
    ],
)
def test_one_value_through_the_decoder_equals_sql_value(ft: ColumnType, datum: Datum) -> None:
    data = encode_inserted_row([IntDatum(1)], [(2, datum)])
    decoder = row_decoder([(1, "id", SIGNED), (2, "v", ft)], [(1, "id", SIGNED)], dt.UTC)
    assert decoder.inserted(data) == {"id": 1, "v": sql_value(datum, "v", ft, dt.UTC)}


@pytest.mark.parametrize(
    ("ft", "datum"),
    [
        (SIGNED, BytesDatum(b"12")),  # bytes in an int column
        (STRING, IntDatum(5)),  # an int in a string column
        (FLOAT, IntDatum(5)),
        (ColumnType(mt.TYPE_NEWDECIMAL, flen=10, decimal=2), BytesDatum(b"1.5")),
        (ColumnType(mt.TYPE_DATE), BytesDatum(b"2024-01-01")),
    ],
)
def test_a_datum_the_column_cannot_hold_fails_as_sql_value_does(
    ft: ColumnType, datum: Datum
) -> None:
    with pytest.raises(DecodeError) as want:
        sql_value(datum, "v", ft, dt.UTC)
    decoder = row_decoder([(2, "v", ft)], [], dt.UTC)
    with pytest.raises(DecodeError) as got:
        decoder.deleted(encode_deleted_row([(2, datum)]))
    assert str(got.value) == str(want.value)
    comparable = encode_key(IntDatum(2)) + encode_key(datum)  # the key encodings, same rule
    with pytest.raises(DecodeError):
        decoder.deleted(comparable)


def test_an_unsigned_int_handle_fills_its_missing_column_wrapped() -> None:
    decoder = row_decoder([(1, "id", UNSIGNED), (2, "v", STRING)], [(1, "id", UNSIGNED)], dt.UTC)
    data = encode_inserted_row([IntDatum(-1)], [(2, BytesDatum(b"x"))])
    assert decoder.inserted(data) == {"id": (1 << 64) - 1, "v": "x"}
    assert list(decoder.inserted(data)) == ["id", "v"]
