"""binlogfile: framing, segment names, torn tails vs corrupt records, rotation, restore."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from crc32c import crc32c

from tributary.sinks.file.binlogfile import (
    MAGIC,
    BinlogFileError,
    CorruptRecord,
    Position,
    Record,
    Segment,
    SegmentWriter,
    Torn,
    encode,
    list_segments,
    parse_segment_name,
    read_directory,
    scan_segment,
    segment_name,
)

WHEN = dt.datetime(2024, 2, 29, 10, 15, 0)


def clock() -> float:
    return WHEN.timestamp()


def write_segment(directory: Path, index: int, payloads: list[bytes], tail: bytes = b"") -> Segment:
    path = directory / segment_name(index, WHEN)
    path.write_bytes(b"".join(encode(p) for p in payloads) + tail)
    return Segment(path, index)


def payloads_of(items: list[Record | Torn]) -> list[bytes]:
    return [i.payload for i in items if isinstance(i, Record)]


def test_frame_layout_is_tidb_binlogs() -> None:
    payload = b"hello"
    framed = encode(payload)
    assert framed[:12] == struct.pack("<IQ", 471532804, 5)
    assert framed[12:17] == payload
    assert framed[17:] == struct.pack("<I", crc32c(payload))  # CRC-32C as a trailer
    assert MAGIC == 471532804


def test_round_trip_with_offsets(tmp_path: Path) -> None:
    payloads = [b"", b"a", b"x" * 70000, bytes(range(256))]
    segment = write_segment(tmp_path, 0, payloads)
    items = list(scan_segment(segment))
    assert payloads_of(items) == payloads
    ends = [16, 33, 33 + 70016, 33 + 70016 + 272]
    assert [(r.offset, r.end) for r in items if isinstance(r, Record)] == list(
        zip([0, *ends[:-1]], ends, strict=True)
    )
    assert not any(isinstance(i, Torn) for i in items)
    # from an offset, up to a limit
    assert payloads_of(list(scan_segment(segment, 16, 33))) == [b"a"]


def test_segment_names() -> None:
    assert segment_name(3, WHEN) == "binlog-0000000000000003-20240229101500"
    assert parse_segment_name("binlog-0000000000000003-20240229101500") == 3
    assert parse_segment_name("binlog-0000000000000012") == 12  # legacy
    assert parse_segment_name("binlog-v2.1-0000000000000007-20181010101010") == 7
    for other in ("savepoint", "sink.checkpoint", "binlog-abc", "binlog-1-2024", "x.tmp"):
        assert parse_segment_name(other) is None


def test_listing_orders_by_index_and_ignores_other_files(tmp_path: Path) -> None:
    for name in ("binlog-0000000000000010-20240101000000", "binlog-0000000000000002", "notes"):
        (tmp_path / name).write_bytes(b"")
    assert [s.index for s in list_segments(tmp_path)] == [2, 10]
    (tmp_path / "binlog-0000000000000002-20240101000000").write_bytes(b"")
    with pytest.raises(BinlogFileError, match="two segments with index 2"):
        list_segments(tmp_path)


@pytest.mark.parametrize(
    "cut",
    [
        lambda rec: rec[:5],  # header cut short
        lambda rec: rec[:20],  # payload cut short
        lambda rec: rec[:-1],  # CRC cut short
        lambda rec: rec[:12] + bytes(len(rec) - 12),  # size written, data never reached disk
        lambda rec: bytes(len(rec)),  # the file grew, nothing of the record reached disk
    ],
)
def test_torn_tail_is_reported_at_its_offset(tmp_path: Path, cut: Callable[[bytes], bytes]) -> None:
    good = [b"first", b"second"]
    last = encode(b"y" * 40)
    segment = write_segment(tmp_path, 0, good, tail=cut(last))
    items = list(scan_segment(segment))
    assert payloads_of(items) == good
    assert items[-1] == Torn(segment, len(encode(b"first")) + len(encode(b"second")))


def test_bad_crc_of_the_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    last = bytearray(encode(b"z" * 30))
    last[20] ^= 0xFF
    segment = write_segment(tmp_path, 0, [b"a"], tail=bytes(last) + bytes(100))
    items = list(scan_segment(segment))
    assert payloads_of(items) == [b"a"]
    assert items[-1] == Torn(segment, 17)


def test_corrupt_record_in_the_middle_is_an_error_naming_file_and_offset(tmp_path: Path) -> None:
    segment = write_segment(tmp_path, 0, [b"a" * 10, b"b" * 10, b"c" * 10])
    data = bytearray(segment.path.read_bytes())
    data[26 + 14] ^= 0x01  # a payload byte of the second record (offset 26)
    segment.path.write_bytes(bytes(data))
    seen: list[bytes] = []
    with pytest.raises(CorruptRecord) as info:
        for item in scan_segment(segment):
            assert isinstance(item, Record)
            seen.append(item.payload)
    assert seen == [b"a" * 10]
    assert info.value.offset == 26 and info.value.path == segment.path
    assert str(segment.path) in str(info.value) and "offset 26" in str(info.value)
    # a bad magic with data after it is corruption too, not a tail
    data = bytearray(encode(b"a")) + b"garbage!" * 4 + encode(b"b")
    segment.path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecord, match="bad magic"):
        list(scan_segment(segment))


def test_directory_reader_tolerates_a_torn_tail_only_in_the_last_segment(tmp_path: Path) -> None:
    write_segment(tmp_path, 0, [b"a", b"b"])
    write_segment(tmp_path, 1, [b"c"], tail=encode(b"d")[:7])
    items = list(read_directory(tmp_path))
    assert payloads_of(items) == [b"a", b"b", b"c"]
    assert isinstance(items[-1], Torn) and items[-1].segment.index == 1
    assert payloads_of(list(read_directory(tmp_path, first_index=1))) == [b"c"]
    write_segment(tmp_path, 2, [b"e"])
    with pytest.raises(BinlogFileError, match="torn record at offset 17, and newer segments"):
        list(read_directory(tmp_path))


def test_directory_reader_stops_at_a_position(tmp_path: Path) -> None:
    write_segment(tmp_path, 0, [b"a", b"b"])
    second = write_segment(tmp_path, 1, [b"c", b"d"])
    write_segment(tmp_path, 2, [b"e"])
    upto = Position(second.name, len(encode(b"c")))
    assert payloads_of(list(read_directory(tmp_path, upto=upto))) == [b"a", b"b", b"c"]
    assert list(read_directory(tmp_path, first_index=2, upto=upto)) == []
    with pytest.raises(BinlogFileError, match="no segment"):
        list(read_directory(tmp_path, upto=Position("binlog-0000000000000009", 0)))


def test_writer_rotates_at_the_first_boundary_past_the_size(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path, 100, clock)
    writer.start()
    records = [encode(bytes([i]) * 30) for i in range(7)]  # 46 bytes each
    writer.append(records[:2])  # 92 bytes: under 100, stays open
    writer.append(records[2:])  # 138 -> rotate; then 3 more (138) -> rotate; then 1
    writer.sync()
    writer.close()
    segments = list_segments(tmp_path)
    assert [s.index for s in segments] == [0, 1, 2]
    assert segments[0].name == "binlog-0000000000000000-20240229101500"
    sizes = [s.path.stat().st_size for s in segments]
    assert sizes == [138, 138, 46]
    assert payloads_of(list(read_directory(tmp_path))) == [bytes([i]) * 30 for i in range(7)]
    assert writer.position == Position(segments[2].name, 46)


def test_restore_cuts_the_segment_and_removes_later_ones(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path, 50, clock)
    writer.start()
    writer.append([encode(b"a" * 30)])
    saved = writer.position
    writer.append([encode(b"b" * 30), encode(b"c" * 30), encode(b"d" * 30)])  # [a b] [c d]
    assert len(list_segments(tmp_path)) == 2
    writer.restore(saved)
    assert [s.index for s in list_segments(tmp_path)] == [0]
    assert writer.position == saved
    writer.append([encode(b"e")])
    writer.close()
    assert payloads_of(list(read_directory(tmp_path))) == [b"a" * 30, b"e"]


def test_restore_refuses_a_segment_shorter_than_the_position(tmp_path: Path) -> None:
    segment = write_segment(tmp_path, 0, [b"a"])
    writer = SegmentWriter(tmp_path, 50, clock)
    with pytest.raises(BinlogFileError, match="17 bytes where 40 were written"):
        writer.restore(Position(segment.name, 40))
    with pytest.raises(BinlogFileError, match="missing"):
        writer.restore(Position("binlog-0000000000000005", 0))
