"""The one varint reader and writer, shared by the wire readers and the TiDB codec."""

from __future__ import annotations

import pytest

from tributary.tidbcodec.errors import DecodeError
from tributary.varint import UINT64, int64, read_varint, varint


class Bad(ValueError):
    pass


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16383, "ff7f"),
        (16384, "808001"),
        ((1 << 21) - 1, "ffff7f"),
        (1 << 21, "80808001"),
        (UINT64 - 1, "ffffffffffffffffff01"),
        (-1, "ffffffffffffffffff01"),
    ],
)
def test_known_encodings(value: int, encoded: str) -> None:
    data = bytes.fromhex(encoded)
    assert varint(value) == data
    assert read_varint(data, 0, len(data), Bad) == (value % UINT64, len(data))
    # the same bytes inside a longer buffer: the reader stops at the varint's end
    framed = b"\x07" + data + b"tail"
    assert read_varint(framed, 1, len(framed), Bad) == (value % UINT64, 1 + len(data))


def test_int64_reads_twos_complement() -> None:
    assert int64(read_varint(varint(-5), 0, 10, Bad)[0]) == -5
    assert int64(7) == 7


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "truncated"),
        (b"\x80", "truncated"),
        (b"\x80\x80\x80", "truncated"),
        (b"\xff" * 9 + b"\x02", "overflows 64 bits"),  # Go's binary.Uvarint refuses it too
        (b"\xff" * 10 + b"\x01", "too long"),
    ],
)
def test_bad_varints_raise_the_callers_error(data: bytes, says: str) -> None:
    with pytest.raises(Bad, match=says):
        read_varint(data, 0, len(data), Bad)
    with pytest.raises(DecodeError):
        read_varint(data, 0, len(data), DecodeError)


def test_end_bounds_the_read() -> None:
    data = b"\x80\x80\x01"  # 16384 if read whole
    with pytest.raises(Bad, match="truncated"):
        read_varint(data, 0, 2, Bad)
    assert read_varint(data, 0, 3, Bad) == (16384, 3)
