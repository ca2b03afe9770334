"""Value-log framing, recovery scan, rotation with footers, rollback and segment GC."""

from __future__ import annotations

import struct
from pathlib import Path

from crc32c import crc32c

from services.pump.storage.record import (
    FOOTER_SIZE,
    HEADER_SIZE,
    Corrupt,
    Found,
    Torn,
    decode,
    decode_footer,
    encode,
    encode_batch,
    encode_footer,
    scan,
)
from services.pump.storage.segment import Pointer
from services.pump.storage.vlog import ValueLog
from tests.support.pump_binlogs import fake


def test_record_layout_is_tidb_binlogs() -> None:
    payload = b"hello binlog"
    rec = encode(payload)
    assert rec[:4] == bytes.fromhex("e8563a82")  # magic 0x823a56e8, little-endian
    assert struct.unpack("<Q", rec[4:12])[0] == len(payload)
    assert struct.unpack("<I", rec[12:16])[0] == crc32c(payload)
    assert rec[16:] == payload and HEADER_SIZE == 16
    # CRC-32C (Castagnoli) check value of "123456789"
    assert crc32c(b"123456789") == 0xE3069283
    assert decode(rec) == payload


def test_footer_layout() -> None:
    f = encode_footer(1234567)
    assert len(f) == FOOTER_SIZE == 12
    assert f[8:] == bytes.fromhex("22b93a12")  # 0x123ab922 little-endian
    assert decode_footer(f) == 1234567
    assert decode_footer(b"\0" * 12) is None


def test_decode_rejects_bad_crc_and_wrong_length() -> None:
    rec = bytearray(encode(b"payload"))
    rec[-1] ^= 0x01
    assert decode(bytes(rec)) is None
    assert decode(encode(b"payload")[:-1]) is None


def test_encode_batch_is_the_concatenation_of_records() -> None:
    buf, sizes = encode_batch([b"a", b"bb", b""])
    assert buf == encode(b"a") + encode(b"bb") + encode(b"")
    assert sizes == [17, 18, 16]


def test_scan_skips_a_flipped_byte_and_reports_the_span() -> None:
    a, b, c = encode(b"A" * 40), encode(b"B" * 40), encode(b"C" * 40)
    buf = bytearray(a + b + c)
    buf[len(a) + HEADER_SIZE + 5] ^= 0xFF  # inside B's payload
    events = list(scan(bytes(buf), 0, len(buf)))
    assert events[0] == Found(0, len(a), b"A" * 40)
    assert events[1] == Corrupt(len(a), len(a) + len(b))
    assert events[2] == Found(len(a) + len(b), len(buf), b"C" * 40)
    assert len(events) == 3


def test_scan_passes_over_a_magic_inside_damaged_bytes() -> None:
    a, c = encode(b"A" * 10), encode(b"C" * 10)
    junk = b"\x00" * 7 + encode(b"fake")[:-1] + b"\x01" * 3  # a magic whose record is bad
    buf = a + junk + c
    events = list(scan(buf, 0, len(buf)))
    assert [type(e) for e in events] == [Found, Corrupt, Found]
    assert events[1] == Corrupt(len(a), len(a) + len(junk))


def test_scan_reports_a_torn_tail() -> None:
    a, b = encode(b"A" * 30), encode(b"B" * 30)
    for cut in (1, HEADER_SIZE - 1, HEADER_SIZE + 3, len(b) - 1):
        buf = a + b[:cut]
        assert list(scan(buf, 0, len(buf))) == [Found(0, len(a), b"A" * 30), Torn(len(a), len(buf))]


def _payloads(n: int, start: int = 100) -> list[bytes]:
    return [fake(start + i).payload for i in range(n)]


def test_append_then_read_back(tmp_path: Path) -> None:
    vlog = ValueLog.open(tmp_path, segment_size=1 << 20)
    payloads = _payloads(5)
    a = vlog.append(payloads, max_ts=104)
    assert a.fid == 0 and a.offsets[0] == 0 and len(a.sizes) == 5
    got = vlog.read_many([(a.fid, off, size) for off, size in zip(a.offsets, a.sizes, strict=True)])
    assert got == payloads
    vlog.close(finalize_min=1 << 30)


def test_rotation_writes_a_footer_with_the_max_ts(tmp_path: Path) -> None:
    vlog = ValueLog.open(tmp_path, segment_size=60)  # every batch (~90 bytes) fills one
    fids = [vlog.append(_payloads(4, start=10 * i), max_ts=10 * i + 3).fid for i in range(1, 6)]
    assert fids == [0, 1, 2, 3, 4]
    vlog.close(finalize_min=1 << 30)  # too small: the current segment stays open
    files = sorted(tmp_path.glob("*.vlog"))
    assert [f.name for f in files][:2] == ["000000.vlog", "000001.vlog"]
    for f in files[:-1]:
        assert decode_footer(f.read_bytes()[-FOOTER_SIZE:]) is not None
    assert decode_footer(files[0].read_bytes()[-FOOTER_SIZE:]) == 13
    assert decode_footer(files[-1].read_bytes()[-FOOTER_SIZE:]) is None
    # Reopen: finalized segments are trusted, the open one is scanned and continued.
    again = ValueLog.open(tmp_path, segment_size=60)
    assert again.active_fid == fids[-1]
    assert [s.finalized for s in again.segments()] == [True] * (len(files) - 1) + [False]
    records, nxt = again.scan_from(Pointer(0, 0), 1 << 20)
    assert nxt is None and len(records) == 20
    again.close(finalize_min=1)
    assert decode_footer(files[-1].read_bytes()[-FOOTER_SIZE:]) == 53


def test_reopen_truncates_a_torn_last_record(tmp_path: Path) -> None:
    vlog = ValueLog.open(tmp_path, segment_size=1 << 20)
    a = vlog.append(_payloads(3), max_ts=102)
    vlog.close(finalize_min=1 << 30)
    path = tmp_path / "000000.vlog"
    good = a.offsets[2]
    with path.open("r+b") as f:
        f.truncate(good + 20)  # the third record cut short
    again = ValueLog.open(tmp_path, segment_size=1 << 20)
    assert path.stat().st_size == good
    assert again.torn_bytes == 20 and again.damaged == []
    records, _ = again.scan_from(Pointer(0, 0), 1 << 20)
    assert [r.payload for r in records] == _payloads(2)
    b = again.append(_payloads(1, start=200), max_ts=200)
    assert b.offsets == [good]  # new data follows the good data
    again.close(finalize_min=1 << 30)


def test_reopen_skips_a_flipped_byte_in_the_middle_record(tmp_path: Path) -> None:
    vlog = ValueLog.open(tmp_path, segment_size=1 << 20)
    a = vlog.append(_payloads(3), max_ts=102)
    vlog.close(finalize_min=1 << 30)
    path = tmp_path / "000000.vlog"
    data = bytearray(path.read_bytes())
    data[a.offsets[1] + HEADER_SIZE + 2] ^= 0x40
    path.write_bytes(bytes(data))
    again = ValueLog.open(tmp_path, segment_size=1 << 20)
    assert again.damaged == [(0, a.offsets[1], a.offsets[2])]
    records, _ = again.scan_from(Pointer(0, 0), 1 << 20)
    assert [r.payload for r in records] == [_payloads(3)[0], _payloads(3)[2]]
    assert again.damaged == [(0, a.offsets[1], a.offsets[2])]  # counted once
    assert path.stat().st_size == len(data)  # nothing truncated
    assert again.read_many([(0, a.offsets[1], a.sizes[1])]) == [None]
    again.close(finalize_min=1 << 30)


def test_rollback_cuts_the_batch_off(tmp_path: Path) -> None:
    vlog = ValueLog.open(tmp_path, segment_size=1 << 20)
    vlog.append(_payloads(2), max_ts=101)
    size = (tmp_path / "000000.vlog").stat().st_size
    b = vlog.append(_payloads(3, start=500), max_ts=502)
    vlog.rollback(b)
    assert (tmp_path / "000000.vlog").stat().st_size == size
    c = vlog.append(_payloads(1, start=600), max_ts=600)
    assert c.offsets == [size]
    vlog.close(finalize_min=1)
    assert decode_footer((tmp_path / "000000.vlog").read_bytes()[-FOOTER_SIZE:]) == 600


def test_remove_upto_deletes_only_finalized_segments_at_or_below_the_ts(tmp_path: Path) -> None:
    vlog = ValueLog.open(tmp_path, segment_size=50)
    for i in range(1, 5):
        vlog.append(_payloads(3, start=100 * i), max_ts=100 * i + 2)
    # segments 0..2 finalized with max ts 102, 202, 302; 3 is current (402)
    assert vlog.remove_upto(250) == [0, 1]
    assert sorted(p.name for p in tmp_path.glob("*.vlog")) == ["000002.vlog", "000003.vlog"]
    assert vlog.remove_upto(10_000) == [2]  # never the current segment
    assert vlog.read_many([(0, 0, 50)]) == [None]  # purged
    vlog.close(finalize_min=1 << 30)
