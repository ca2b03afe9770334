"""Binary JSON and its text form (types/json_binary.go, json_binary_test.go)."""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.tidbcodec import json_binary as jb
from tributary.tidbcodec.errors import DecodeError, EncodeError
from tributary.tidbcodec.json_text import format_float, quote, to_text


def test_object_layout_vector() -> None:
    # count | size | key entry (off 19, len 1) | value entry (inlined true) | key "a"
    tc, data = jb.encode({"a": True})
    assert tc == jb.OBJECT
    assert data == bytes.fromhex("0100000014000000130000000100040100000061")
    assert jb.decode(tc, data) == {"a": True}


def test_array_layout_vector() -> None:
    tc, data = jb.encode([1, "x", None])
    assert tc == jb.ARRAY
    assert data == bytes.fromhex(
        "030000002100000009170000000c1f000000040000000001000000000000000178"
    )
    assert jb.decode(tc, data) == [1, "x", None]


def test_scalar_vectors() -> None:
    assert jb.encode(None) == (jb.LITERAL, b"\x00")
    assert jb.encode(True) == (jb.LITERAL, b"\x01")
    assert jb.encode(False) == (jb.LITERAL, b"\x02")
    assert jb.encode(-2) == (jb.INT64, bytes.fromhex("feffffffffffffff"))
    assert jb.encode(1 << 63) == (jb.UINT64, bytes.fromhex("0000000000000080"))
    assert jb.encode(1.5) == (jb.FLOAT64, bytes.fromhex("000000000000f83f"))
    assert jb.encode("hé") == (jb.STRING, b"\x03h\xc3\xa9")


def test_keys_sorted_by_utf8_bytes() -> None:
    # Go sorts keys with strings.Compare (bytewise); "Z" < "a" < "é".
    tc, data = jb.encode({"é": 1, "a": 2, "Z": 3})
    obj = jb.decode(tc, data)
    assert isinstance(obj, dict) and list(obj) == ["Z", "a", "é"]


# json_binary_test.go TestBinaryJSONMarshalUnmarshal: text -> binary -> text is identical.
TIDB_TEXTS = [
    '{"a": [1, "2", {"aa": "bb"}, 4, null], "b": true, "c": null}',
    '{"aaaaaaaaaaa": [1, "2", {"aa": "bb"}, 4.1], "bbbbbbbbbb": true, "ccccccccc": "d"}',
    '[{"a": 1, "b": true}, 3, 3.5, "hello, world", null, true]',
    '{"a": "&<>"}',
]


@pytest.mark.parametrize("text", TIDB_TEXTS)
def test_tidb_marshal_texts(text: str) -> None:
    tc, data = jb.encode(json.loads(text))
    assert to_text(jb.decode(tc, data)) == text


def test_text_details_match_go() -> None:
    assert format_float(4.0) == "4"
    assert format_float(-0.0) == "-0"
    assert format_float(0.1) == "0.1"
    assert format_float(1e20) == "100000000000000000000"
    assert format_float(1e21) == "1e+21"
    assert format_float(1e-7) == "1e-7"
    assert format_float(1.5e-10) == "1.5e-10"
    assert format_float(123456.789) == "123456.789"
    assert quote('a"b\\c\n\t\x01\u2028') == '"a\\"b\\\\c\\n\\t\\u0001\\u2028"'
    assert to_text([dt.date(2020, 1, 2), dt.datetime(2020, 1, 2, 3, 4, 5)]) == (
        '["2020-01-02", "2020-01-02 03:04:05.000000"]'
    )
    assert to_text(-dt.timedelta(hours=838, seconds=1)) == '"-838:00:01.000000"'
    assert to_text(jb.JsonOpaque(0xFC, b"ab")) == '"base64:type252:YWI="'


def test_typed_scalars_round_trip_and_peek() -> None:
    values: list[jb.JsonValue] = [
        dt.date(2020, 1, 2),
        dt.datetime(2020, 1, 2, 3, 4, 5, 6),
        dt.timedelta(hours=-3, microseconds=5),
        jb.JsonOpaque(0xFC, b"\x00\x01"),
        "x" * 200,
        {"k": [1.25, {"n": None}]},
    ]
    for v in values:
        tc, data = jb.encode(v)
        assert jb.decode(tc, data) == v
        assert jb.peek_size(bytes([tc]) + data + b"junk", 0) == 1 + len(data)


def test_invalid_values_and_bytes_rejected() -> None:
    for bad in (math.inf, math.nan, 1 << 64, -(1 << 63) - 1, object()):
        with pytest.raises(EncodeError):
            jb.encode(bad)  # type: ignore[arg-type]
    with pytest.raises(EncodeError):
        jb.encode({"k" * 70000: 1})
    with pytest.raises(DecodeError):
        jb.decode(jb.ARRAY, b"\x05\x00\x00\x00")  # claims 5 entries, has none
    with pytest.raises(DecodeError):
        jb.decode(0x42, b"")
    with pytest.raises(DecodeError):
        jb.peek_size(b"\x42", 0)
    nested: jb.JsonValue = []
    for _ in range(jb.MAX_DEPTH + 1):
        nested = [nested]
    with pytest.raises(EncodeError):
        jb.encode(nested)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=25,
)


@settings(deadline=None)
@given(JSON_VALUES)
def test_round_trip(value: jb.JsonValue) -> None:
    tc, data = jb.encode(value)
    assert jb.decode(tc, data) == value
    assert jb.peek_size(bytes([tc]) + data, 0) == len(data) + 1


def _same(parsed: object, value: jb.JsonValue) -> bool:
    """Equal as JSON: a float printed without a fraction ("1e+21", "3") parses back as an int."""
    if isinstance(value, float):
        return isinstance(parsed, int | float) and float(parsed) == value
    if isinstance(value, list):
        return (
            isinstance(parsed, list)
            and len(parsed) == len(value)
            and all(_same(p, v) for p, v in zip(parsed, value, strict=True))
        )
    if isinstance(value, dict):
        return (
            isinstance(parsed, dict)
            and parsed.keys() == value.keys()
            and all(_same(parsed[k], value[k]) for k in value)
        )
    return parsed == value and type(parsed) is type(value)


@settings(deadline=None)
@given(JSON_VALUES)
def test_text_is_valid_json_of_the_same_value(value: jb.JsonValue) -> None:
    assert _same(json.loads(to_text(value)), value)


@settings(deadline=None)
@given(
    st.sampled_from([jb.OBJECT, jb.ARRAY, jb.STRING, jb.OPAQUE, jb.DATE]), st.binary(max_size=64)
)
def test_arbitrary_bytes_decode_or_fail_cleanly(type_code: int, data: bytes) -> None:
    try:
        jb.decode(type_code, data)
    except DecodeError:
        pass


def test_self_referencing_offsets_are_rejected() -> None:
    # An array whose only entry points back at the array itself.
    loop = bytes.fromhex("010000000d0000000300000000")
    with pytest.raises(DecodeError):
        jb.decode(jb.ARRAY, loop)
