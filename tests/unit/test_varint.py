"""The one varint reader and writer, shared by the wire readers and the TiDB codec."""

from __future__ import annotations

import random

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


def _reference(buf: bytes, pos: int, end: int) -> tuple[int, int] | str:
    """Go's ``binary.Uvarint``, a byte at a time: (value, end) or the error's words."""
    result = 0
    for i in range(10):
        if pos + i >= end:
            return "truncated"
        b = buf[pos + i]
        if i == 9 and b > 1:
            return "overflows 64 bits" if b < 0x80 else "too long"
        result |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return result, pos + i + 1
    raise AssertionError("unreachable")


def test_every_length_and_every_end_read_as_go_reads_them() -> None:
    """The unrolled paths (up to nine bytes with nine left) agree with a byte-at-a-time read
    for varints of every length, cut at every end, with and without bytes after them."""
    rng = random.Random(7)
    values = [0, 1, 127, 128, UINT64 - 1, -1, (1 << 58) + 12345]
    values += [rng.getrandbits(rng.randrange(1, 65)) for _ in range(300)]
    raw = [b"\xff" * 9 + bytes([b]) for b in (0x00, 0x01, 0x02, 0x7F, 0x80)]
    for data in [varint(v) for v in values] + raw:
        for tail in (b"", b"\x00", b"\x81\x82\x83" * 4):
            buf = b"\x05" + data + tail
            for end in range(1, len(buf) + 1):
                want = _reference(buf, 1, end)
                if isinstance(want, str):
                    with pytest.raises(Bad, match=want):
                        read_varint(buf, 1, end, Bad)
                else:
                    assert read_varint(buf, 1, end, Bad) == want, (buf.hex(), end)
