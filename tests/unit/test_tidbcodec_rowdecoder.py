"""The compiled row decoder gives exactly what ``decode_*_row`` + a per-column converter give,
and rejects exactly the rows those decoders reject."""

from __future__ import annotations

from collections.abc import Mapping
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
    NullDatum,
    UintDatum,
    encode_key,
    encode_value,
)
from tributary.tidbcodec.errors import DecodeError
from tributary.tidbcodec.row import (
    decode_deleted_row,
    decode_inserted_row,
    decode_updated_row,
    encode_deleted_row,
    encode_inserted_row,
    encode_old_row,
    encode_updated_row,
)
from tributary.tidbcodec.rowdecoder import Field, RowDecoder

KNOWN = range(-1, 40)  # column ids the table has; the rows also carry others


def _as_is(d: Datum) -> object:
    return d


def _plain(d: Datum) -> object:
    """The value the shortcut converters below give: the payload of int and bytes datums."""
    return d.value if isinstance(d, IntDatum | UintDatum | BytesDatum) else d


def _same(v: object) -> object:
    return v


# Every value through ``datum`` (so the decoder must rebuild the exact datum kind) ...
GENERIC = [Field(i, f"c{i}", _as_is) for i in KNOWN]
# ... and the shortcuts for int and bytes datums.
SHORTCUT = [Field(i, f"c{i}", _plain, ints=_same, text=_same) for i in KNOWN]


def expected(cols: Mapping[int, Datum], fields: list[Field[object]]) -> dict[str, object]:
    """What decode_*_row + each field's ``datum`` give, NULL as None, in the fields' order."""
    return {
        f.name: None if isinstance(cols[f.id], NullDatum) else f.datum(cols[f.id])
        for f in fields
        if f.id in cols
    }


VALUES = st.one_of(
    st.just(NULL),
    st.builds(IntDatum, st.integers(-(1 << 63), (1 << 63) - 1)),
    st.builds(UintDatum, st.integers(0, (1 << 64) - 1)),
    st.builds(FloatDatum, st.floats(allow_nan=False)),
    st.builds(BytesDatum, st.binary(max_size=200)),
)
ROWS = st.dictionaries(st.integers(-1, 300), VALUES, max_size=12)
# Rows as TiDB writes them: known columns only, in table order (the decoder's short path).
ROWS_IN_ORDER = st.dictionaries(st.integers(1, 39), VALUES, max_size=12).map(
    lambda r: dict(sorted(r.items()))
)
FIELD_SETS = st.sampled_from([GENERIC, SHORTCUT])


@settings(deadline=None)
@given(ROWS | ROWS_IN_ORDER, FIELD_SETS)
def test_deleted_rows_decode_like_the_datum_decoder(
    row: dict[int, Datum], fields: list[Field[object]]
) -> None:
    data = encode_deleted_row(row.items())
    got = RowDecoder(fields).deleted(data)
    assert got == expected(decode_deleted_row(data), fields)
    assert list(got) == list(expected(row, fields))  # table order, whatever the row's order


@settings(deadline=None)
@given(ROWS, st.data(), FIELD_SETS)
def test_updated_rows_decode_like_the_datum_decoder(
    old: dict[int, Datum], data: st.DataObject, fields: list[Field[object]]
) -> None:
    new = {col: data.draw(VALUES) for col in reversed(old)}
    encoded = encode_updated_row(old.items(), new.items())
    want_old, want_new = decode_updated_row(encoded)
    got_old, got_new = RowDecoder(fields).updated(encoded)
    assert (got_old, got_new) == (expected(want_old, fields), expected(want_new, fields))
    assert list(got_new) == list(expected(new, fields))


@settings(deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=2), ROWS | ROWS_IN_ORDER, FIELD_SETS)
def test_inserted_rows_fill_missing_handle_columns(
    handle: list[Datum], row: dict[int, Datum], fields: list[Field[object]]
) -> None:
    data = encode_inserted_row(handle, row.items())
    handle_fields = [fields[1], fields[3]][: len(handle)]  # columns 0 and 2 are the handle
    got = RowDecoder(fields, handle_fields).inserted(data)
    handle_datums, cols = decode_inserted_row(data, len(handle))
    for f, d in zip(handle_fields, handle_datums, strict=True):
        cols.setdefault(f.id, d)
    assert got == expected(cols, fields)
    assert list(got) == list(expected(cols, fields))


def test_an_int_handle_fills_its_column_only_when_the_row_lacks_it() -> None:
    decoder = RowDecoder(SHORTCUT, [SHORTCUT[2]])  # column 1
    only_handle = encode_inserted_row([IntDatum(-5)], [(2, BytesDatum(b"x"))])
    assert decoder.inserted(only_handle) == {"c1": -5, "c2": b"x"}
    both = encode_inserted_row([IntDatum(-5)], [(1, IntDatum(9)), (2, NULL)])
    assert decoder.inserted(both) == {"c1": 9, "c2": None}
    no_handle_column = RowDecoder(SHORTCUT, [None])
    assert no_handle_column.inserted(only_handle) == {"c2": b"x"}


def test_comparable_and_rare_encodings_go_through_the_datum_converter() -> None:
    seen: list[Datum] = []

    def datum(d: Datum) -> object:
        seen.append(d)
        return "via datum"

    fields = [
        Field(1, "a", datum, ints=_same, text=_same),
        Field(2, "b", datum),
        Field(3, "c", datum),
    ]
    row = b"".join(
        [
            encode_value(IntDatum(1)) + encode_key(IntDatum(-7)),  # comparable int: shortcut
            encode_value(IntDatum(2)) + encode_key(BytesDatum(b"k")),  # comparable bytes
            encode_value(IntDatum(3)) + encode_value(DecimalDatum(Decimal("1.5"))),
        ]
    )
    assert RowDecoder(fields).deleted(row) == {"a": -7, "b": "via datum", "c": "via datum"}
    assert seen[0] == BytesDatum(b"k") and isinstance(seen[1], DecimalDatum)


def test_multi_byte_ids_lengths_and_varints() -> None:
    fields = [Field(i, f"c{i}", _plain, ints=_same, text=_same) for i in (1, 64, 5000, -1)]
    row: list[tuple[int, Datum]] = [
        (5000, BytesDatum(b"x" * 300)),
        (64, IntDatum(-(1 << 63))),
        (1, UintDatum((1 << 64) - 1)),
        (-1, IntDatum(1 << 40)),
    ]
    assert RowDecoder(fields).deleted(encode_old_row(row)) == {
        "c1": (1 << 64) - 1,
        "c64": -(1 << 63),
        "c5000": b"x" * 300,
        "c-1": 1 << 40,
    }


CORRUPT_ROWS = [
    encode_value(IntDatum(1)),  # column ID without value
    encode_value(BytesDatum(b"id"), IntDatum(1)),  # column ID not an int
    encode_value(IntDatum(1), IntDatum(2), IntDatum(1), IntDatum(3)),  # repeated column
    encode_value(IntDatum(100), IntDatum(2), IntDatum(100), IntDatum(3)),  # repeated, unknown
    bytes([128, 0, 1, 1, 0, 0]),  # new row format
    b"\x08\x02\x08",  # truncated value
    b"\x08\x02\x02\x0a\x61",  # bytes shorter than their length
    b"\x08\x02\x02\x03",  # negative length
    b"\x08\x02\x08" + b"\xff" * 10 + b"\x01",  # varint longer than 10 bytes
    b"\x08\x02\x09" + b"\xff" * 9 + b"\x02",  # uvarint over 64 bits
    b"\x08\x82",  # truncated column id
]


@pytest.mark.parametrize("bad", CORRUPT_ROWS)
def test_corrupt_rows_are_rejected(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_deleted_row(bad)
    with pytest.raises(DecodeError):
        RowDecoder(SHORTCUT).deleted(bad)


@pytest.mark.parametrize(
    "bad",
    [
        encode_old_row([(1, IntDatum(1)), (2, IntDatum(2))]) + encode_old_row([(1, IntDatum(3))]),
        encode_old_row([(1, IntDatum(1))]) * 3,
        encode_old_row([(100, IntDatum(1))]) * 3,  # a column the table does not have
        encode_old_row([(100, IntDatum(1)), (1, NULL)]) + encode_old_row([(1, NULL)]),
        b"\x00" + encode_old_row([(1, IntDatum(1))]),
    ],
)
def test_corrupt_updated_rows_are_rejected(bad: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_updated_row(bad)
    with pytest.raises(DecodeError):
        RowDecoder(SHORTCUT).updated(bad)


def test_empty_rows() -> None:
    decoder = RowDecoder(SHORTCUT, [SHORTCUT[1]])
    assert decoder.deleted(b"\x00") == decoder.deleted(b"") == {}
    assert decoder.updated(encode_updated_row([], [])) == ({}, {})
    assert decoder.inserted(encode_inserted_row([IntDatum(3)], [])) == {"c0": 3}


def _outcome(decode: object, data: bytes) -> object:
    try:
        return decode(data)  # type: ignore[operator]
    except DecodeError:
        return DecodeError


@settings(deadline=None)
@given(st.binary(max_size=64) | ROWS.map(lambda r: encode_old_row(r.items())), st.data())
def test_arbitrary_bytes_fail_exactly_when_the_datum_decoder_fails(
    data: bytes, draw: st.DataObject
) -> None:
    if data and draw.draw(st.booleans()):  # corrupt one byte of a valid row
        i = draw.draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([draw.draw(st.integers(0, 255))]) + data[i + 1 :]
    decoder = RowDecoder(GENERIC, [GENERIC[1]])
    pairs = [
        (decode_deleted_row, decoder.deleted),
        (decode_updated_row, decoder.updated),
        (decode_inserted_row, decoder.inserted),
    ]
    for reference, compiled in pairs:
        assert (_outcome(reference, data) is DecodeError) == (
            _outcome(compiled, data) is DecodeError
        )
