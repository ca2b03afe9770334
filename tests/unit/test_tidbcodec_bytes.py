"""Byte-string codecs against util/codec/bytes_test.go and codec_test.go TestBytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.tidbcodec import bytes_
from tributary.tidbcodec.errors import DecodeError

# bytes_test.go TestBytesCodec: (input, encoded, descending)
TIDB_VECTORS = [
    (b"", [0, 0, 0, 0, 0, 0, 0, 0, 247], False),
    (b"", [255, 255, 255, 255, 255, 255, 255, 255, 8], True),
    (b"\x00", [0, 0, 0, 0, 0, 0, 0, 0, 248], False),
    (b"\x00", [255, 255, 255, 255, 255, 255, 255, 255, 7], True),
    (b"\x01\x02\x03", [1, 2, 3, 0, 0, 0, 0, 0, 250], False),
    (b"\x01\x02\x03", [254, 253, 252, 255, 255, 255, 255, 255, 5], True),
    (b"\x01\x02\x03\x00", [1, 2, 3, 0, 0, 0, 0, 0, 251], False),
    (b"\x01\x02\x03\x00", [254, 253, 252, 255, 255, 255, 255, 255, 4], True),
    (bytes(range(1, 8)), [1, 2, 3, 4, 5, 6, 7, 0, 254], False),
    (bytes(range(1, 8)), [254, 253, 252, 251, 250, 249, 248, 255, 1], True),
    (bytes(8), [0] * 8 + [255] + [0] * 8 + [247], False),
    (bytes(8), [255] * 8 + [0] + [255] * 8 + [8], True),
    (bytes(range(1, 9)), [1, 2, 3, 4, 5, 6, 7, 8, 255] + [0] * 8 + [247], False),
    (bytes(range(1, 9)), [254, 253, 252, 251, 250, 249, 248, 247, 0] + [255] * 8 + [8], True),
    (bytes(range(1, 10)), [1, 2, 3, 4, 5, 6, 7, 8, 255, 9, 0, 0, 0, 0, 0, 0, 0, 248], False),
    (
        bytes(range(1, 10)),
        [254, 253, 252, 251, 250, 249, 248, 247, 0, 246, 255, 255, 255, 255, 255, 255, 255, 7],
        True,
    ),
]

# bytes_test.go: inputs DecodeBytes must reject.
TIDB_BAD = [
    [1, 2, 3, 4],
    [0, 0, 0, 0, 0, 0, 0, 247],
    [0, 0, 0, 0, 0, 0, 0, 0, 246],
    [0, 0, 0, 0, 0, 0, 0, 1, 247],
    [1, 2, 3, 4, 5, 6, 7, 8, 0],
    [1, 2, 3, 4, 5, 6, 7, 8, 255, 1],
    [1, 2, 3, 4, 5, 6, 7, 8, 255, 1, 2, 3, 4, 5, 6, 7, 8],
    [1, 2, 3, 4, 5, 6, 7, 8, 255, 1, 2, 3, 4, 5, 6, 7, 8, 255],
    [1, 2, 3, 4, 5, 6, 7, 8, 255, 1, 2, 3, 4, 5, 6, 7, 8, 0],
]


@pytest.mark.parametrize(("raw", "encoded", "desc"), TIDB_VECTORS)
def test_tidb_group_encoding_vectors(raw: bytes, encoded: list[int], desc: bool) -> None:
    enc = bytes(encoded)
    assert len(enc) == bytes_.encoded_bytes_length(len(raw))
    if desc:
        assert bytes_.encode_bytes_desc(raw) == enc
        assert bytes_.decode_bytes_desc(enc) == (raw, len(enc))
    else:
        assert bytes_.encode_bytes(raw) == enc
        assert bytes_.decode_bytes(enc) == (raw, len(enc))


@pytest.mark.parametrize("bad", TIDB_BAD)
def test_tidb_rejected_inputs(bad: list[int]) -> None:
    with pytest.raises(DecodeError):
        bytes_.decode_bytes(bytes(bad))


# codec_test.go TestBytes comparison table: (a, b, sign of compare(a, b))
ORDER = [
    (b"", b"\x00", -1),
    (b"\x00", b"\x00", 0),
    (b"\xff", b"\x00", 1),
    (b"\xff", b"\xff\x00", -1),
    (b"a", b"b", -1),
    (b"a", b"\x00", 1),
    (b"\x00", b"\x01", -1),
    (b"\x00\x01", b"\x00\x00", 1),
    (b"\x00\x00\x00", b"\x00\x00", 1),
    (bytes(8), bytes(9), -1),
    (b"\x01\x02\x03\x00", b"\x01\x02\x03", 1),
    (b"\x01\x03\x03\x04", b"\x01\x03\x03\x05", -1),
    (bytes(range(1, 8)), bytes(range(1, 9)), -1),
    (bytes(range(1, 10)), bytes(range(1, 9)), 1),
    (bytes(range(1, 9)) + b"\x00", bytes(range(1, 9)), 1),
]


def _cmp(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


@pytest.mark.parametrize(("a", "b", "want"), ORDER)
def test_tidb_order_table(a: bytes, b: bytes, want: int) -> None:
    assert _cmp(bytes_.encode_bytes(a), bytes_.encode_bytes(b)) == want
    assert _cmp(bytes_.encode_bytes_desc(a), bytes_.encode_bytes_desc(b)) == -want


@settings(deadline=None)
@given(st.binary(), st.binary())
def test_group_encoding_round_trips_and_keeps_order(a: bytes, b: bytes) -> None:
    ea, eb = bytes_.encode_bytes(a), bytes_.encode_bytes(b)
    assert bytes_.decode_bytes(ea + b"rest") == (a, len(ea))
    assert bytes_.decode_bytes_desc(bytes_.encode_bytes_desc(a))[0] == a
    assert _cmp(ea, eb) == _cmp(a, b)


@settings(deadline=None)
@given(st.binary())
def test_compact_bytes_round_trip(a: bytes) -> None:
    enc = bytes_.encode_compact_bytes(a)
    assert bytes_.decode_compact_bytes(enc + b"x") == (a, len(enc))


def test_compact_bytes_vector_and_truncation() -> None:
    assert bytes_.encode_compact_bytes(b"abc") == b"\x06abc"  # varint(3) = 06
    with pytest.raises(DecodeError):
        bytes_.decode_compact_bytes(b"\x06ab")
    with pytest.raises(DecodeError):
        bytes_.decode_compact_bytes(b"\x01")  # negative length
