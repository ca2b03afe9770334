"""Value-log record and segment-footer framing, and the recovery scan (pure; no I/O).

Record, little-endian (tidb-binlog ``pump/storage/log.go``)::

    magic uint32 = 0x823a56e8 | length uint64 | crc32c uint32 (of payload) | payload

Footer of a finalized segment: ``max_ts int64 | magic uint32 = 0x123ab922``.

Invariant: :func:`scan` reports a record only if its magic, length and CRC-32C
(Castagnoli) all check out, so bytes that are torn or flipped are never handed
on as a binlog. Corrupt bytes between two good records are reported as one
:class:`Corrupt` span; bytes after the last good record that hold no further
good record are reported as a :class:`Torn` tail (the writer died mid-append,
or the last record itself is damaged).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Generator, Iterable
from dataclasses import dataclass

from crc32c import crc32c

RECORD_MAGIC = 0x823A56E8
FOOTER_MAGIC = 0x123AB922
HEADER = struct.Struct("<IQI")
FOOTER = struct.Struct("<qI")
HEADER_SIZE = HEADER.size  # 16
FOOTER_SIZE = FOOTER.size  # 12
MAGIC_BYTES = struct.pack("<I", RECORD_MAGIC)


def encode(payload: bytes) -> bytes:
    """One framed record."""
    return HEADER.pack(RECORD_MAGIC, len(payload), crc32c(payload)) + payload


def encode_batch(payloads: Iterable[bytes]) -> tuple[bytes, list[int]]:
    """All records of a batch as one buffer, and the size of each record in it."""
    parts: list[bytes] = []
    sizes: list[int] = []
    pack = HEADER.pack
    for payload in payloads:
        parts.append(pack(RECORD_MAGIC, len(payload), crc32c(payload)))
        parts.append(payload)
        sizes.append(HEADER_SIZE + len(payload))
    return b"".join(parts), sizes


def encode_footer(max_ts: int) -> bytes:
    return FOOTER.pack(max_ts, FOOTER_MAGIC)


def decode_footer(tail: bytes) -> int | None:
    """The segment's max ts if ``tail`` (its last 12 bytes) is a footer, else None."""
    if len(tail) != FOOTER_SIZE:
        return None
    max_ts, magic = FOOTER.unpack(tail)
    return int(max_ts) if magic == FOOTER_MAGIC else None


def decode(record: bytes) -> bytes | None:
    """The payload of one whole record (as read back by its pointer), or None if it is bad."""
    if len(record) < HEADER_SIZE:
        return None
    magic, length, crc = HEADER.unpack_from(record, 0)
    if magic != RECORD_MAGIC or HEADER_SIZE + length != len(record):
        return None
    payload = record[HEADER_SIZE:]
    return payload if crc32c(payload) == crc else None


def _record_end(buf: memoryview, pos: int, limit: int) -> int:
    """End offset of the good record at ``pos``, or -1."""
    if pos + HEADER_SIZE > limit:
        return -1
    magic, length, crc = HEADER.unpack_from(buf, pos)
    end = pos + HEADER_SIZE + length
    if magic != RECORD_MAGIC or end > limit:
        return -1
    with buf[pos + HEADER_SIZE : end] as payload:
        return end if crc32c(payload) == crc else -1


@dataclass(frozen=True, slots=True)
class Found:
    """A good record at ``[offset, end)``."""

    offset: int
    end: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Corrupt:
    """Bad bytes at ``[offset, end)``; a good record starts at ``end``."""

    offset: int
    end: int


@dataclass(frozen=True, slots=True)
class Torn:
    """Bytes ``[offset, limit)`` hold no good record: truncate the segment at ``offset``."""

    offset: int
    limit: int


ScanEvent = Found | Corrupt | Torn


def scan(buf: bytes | mmap.mmap, start: int, limit: int) -> Generator[ScanEvent, None, None]:
    """Walk ``buf[start:limit]`` record by record.

    After a bad spot, look for the next magic whose record checks out (a magic
    found inside damaged bytes whose CRC fails is passed over). Example with
    records A, B, C where one byte of B's payload is flipped: yields
    ``Found(A)``, ``Corrupt(B.offset, C.offset)``, ``Found(C)``. If instead C
    is cut short by a crash: ``Found(A)``, ``Found(B)``, ``Torn(C.offset, limit)``.
    Exhaust or close the iterator before closing an mmap passed as ``buf``.
    """
    with memoryview(buf) as view:
        pos = start
        while pos < limit:
            end = _record_end(view, pos, limit)
            if end >= 0:
                yield Found(pos, end, bytes(view[pos + HEADER_SIZE : end]))
                pos = end
                continue
            nxt = buf.find(MAGIC_BYTES, pos + 1, limit)
            while nxt >= 0 and _record_end(view, nxt, limit) < 0:
                nxt = buf.find(MAGIC_BYTES, nxt + 1, limit)
            if nxt < 0:
                yield Torn(pos, limit)
                return
            yield Corrupt(pos, nxt)
            pos = nxt
