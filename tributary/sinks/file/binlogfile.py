"""tidb-binlog's binlogfile: record framing and segment files (the file sink writes them, reparo
reads them).

Record, little-endian (tidb-binlog ``pkg/binlogfile/encoder.go``)::

    magic uint32 = 471532804 | size uint64 | payload (size bytes) | crc uint32 (CRC-32C of payload)

Segments are the files ``binlog-<index %016d>-<YYYYMMDDhhmmss>`` of one directory, in index
order; the names ``binlog-<index>`` and ``binlog-<version>-<index>-<datetime>`` that older
tidb-binlog versions wrote are read too.

Invariant: a record is handed on only if its magic, size and CRC check out, and bad bytes are
never skipped. Bad bytes that run to the end of the segment are a torn tail (a write cut short by
a crash: a short record, or a last record that fails its CRC or is followed only by zeros) and are
reported as ``Torn(offset)``; a bad record with good data after it raises ``CorruptRecord``
naming the file and offset. Example, records A B C: cut C short -> A, B, Torn(C.offset); flip a
byte of B -> A, then CorruptRecord(file, B.offset).
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from crc32c import crc32c

from tributary.sinks.port import SinkError

log = logging.getLogger(__name__)

MAGIC = 471532804
HEADER = struct.Struct("<IQ")
CRC = struct.Struct("<I")
OVERHEAD = HEADER.size + CRC.size  # 16 bytes around each payload
DATETIME_FORMAT = "%Y%m%d%H%M%S"
_NAME = re.compile(r"binlog-(?:(\d+)|(\d+)-(\d{14})|[^-]+-(\d+)-(\d{14}))")
_ZERO_CHUNK = 1 << 16
_RETRIABLE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EINTR}


class BinlogFileError(SinkError):
    """Reading or writing binlog segment files failed."""


class CorruptRecord(BinlogFileError):
    """A bad record with good data after it: the file is damaged, not merely torn."""

    def __init__(self, path: Path, offset: int, why: str) -> None:
        super().__init__(f"{path}: corrupt record at offset {offset}: {why}")
        self.path = path
        self.offset = offset


def io_error(what: str, e: OSError) -> BinlogFileError:
    """An OSError as a BinlogFileError; a full disk or an I/O hiccup may pass (retriable)."""
    return BinlogFileError(f"{what}: {e}", retriable=e.errno in _RETRIABLE_ERRNOS)


def encode(payload: bytes) -> bytes:
    """One framed record."""
    return HEADER.pack(MAGIC, len(payload)) + payload + CRC.pack(crc32c(payload))


def segment_name(index: int, when: dt.datetime) -> str:
    """``binlog-0000000000000003-20240229101500``: the index and the (local) creation time."""
    return f"binlog-{index:016d}-{when.strftime(DATETIME_FORMAT)}"


def parse_segment_name(name: str) -> int | None:
    """The index of a segment file name, or None if ``name`` is not one."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return int(next(g for g in (m.group(1), m.group(2), m.group(4)) if g is not None))


@dataclass(frozen=True, slots=True)
class Segment:
    path: Path
    index: int

    @property
    def name(self) -> str:
        return self.path.name


def list_segments(directory: Path) -> list[Segment]:
    """The segment files of ``directory`` by index; other files are left alone."""
    try:
        names = os.listdir(directory)
    except OSError as e:
        raise io_error(f"cannot list {directory}", e) from e
    found: dict[int, Segment] = {}
    for name in names:
        index = parse_segment_name(name)
        if index is None:
            continue
        if index in found:
            raise BinlogFileError(f"{directory}: two segments with index {index}: {name}")
        found[index] = Segment(directory / name, index)
    return [found[i] for i in sorted(found)]


@dataclass(frozen=True, slots=True)
class Record:
    """A good record at ``[offset, end)`` of ``segment``."""

    segment: Segment
    offset: int
    end: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Torn:
    """The bytes from ``offset`` to the end of ``segment`` hold no whole record."""

    segment: Segment
    offset: int


def _zeros(f: BinaryIO, start: int, limit: int) -> bool:
    """Whether bytes ``[start, limit)`` of ``f`` are all zero (a tail a crash left unwritten)."""
    f.seek(start)
    pos = start
    while pos < limit:
        chunk = f.read(min(_ZERO_CHUNK, limit - pos))
        if not chunk:
            return True
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True


def scan_segment(
    segment: Segment, start: int = 0, limit: int | None = None
) -> Iterator[Record | Torn]:
    """The records of ``segment`` from ``start`` up to ``limit`` (default: its size); a torn
    tail ends the scan with ``Torn``; a bad record followed by data raises ``CorruptRecord``."""
    path = segment.path
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            end = size if limit is None else min(limit, size)
            f.seek(start)
            pos = start
            while pos < end:
                head = f.read(min(HEADER.size, end - pos))
                if len(head) < HEADER.size:
                    yield Torn(segment, pos)
                    return
                magic, length = HEADER.unpack(head)
                if magic != MAGIC:
                    if _zeros(f, pos, end):
                        yield Torn(segment, pos)
                        return
                    raise CorruptRecord(path, pos, f"bad magic {magic:#x}")
                rec_end = pos + OVERHEAD + length
                if rec_end > end:
                    yield Torn(segment, pos)
                    return
                body = f.read(length + CRC.size)
                payload = body[:length]
                if crc32c(payload) != CRC.unpack_from(body, length)[0]:
                    if rec_end == end or _zeros(f, rec_end, end):
                        yield Torn(segment, pos)
                        return
                    raise CorruptRecord(path, pos, "CRC mismatch")
                yield Record(segment, pos, rec_end, payload)
                pos = rec_end
    except OSError as e:
        raise io_error(f"cannot read {path}", e) from e


@dataclass(frozen=True, slots=True)
class Position:
    """Where the next record of a directory goes: a segment file name and a byte offset."""

    segment: str
    offset: int


def read_directory(
    directory: Path, *, first_index: int = 0, upto: Position | None = None
) -> Iterator[Record | Torn]:
    """The records of the segments with index >= ``first_index``, in order, up to ``upto``.

    A torn tail is reported (``Torn``, then the iteration ends) only in the last segment read,
    where a writer that died mid-append leaves it; anywhere else it is a BinlogFileError.
    """
    segments = list_segments(directory)
    if upto is not None:
        stop = next((s for s in segments if s.name == upto.segment), None)
        if stop is None:
            raise BinlogFileError(f"{directory}: no segment {upto.segment} to read up to")
        segments = [s for s in segments if s.index <= stop.index]
    segments = [s for s in segments if s.index >= first_index]
    for n, segment in enumerate(segments):
        limit = upto.offset if upto is not None and segment.name == upto.segment else None
        for item in scan_segment(segment, 0, limit):
            if isinstance(item, Torn) and n != len(segments) - 1:
                where = f"{segment.path}: torn record at offset {item.offset}"
                raise BinlogFileError(f"{where}, and newer segments follow")
            yield item


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SegmentWriter:
    """Appends records to the newest segment of a directory (blocking I/O: call it from a thread).

    A new segment starts once the current one has reached ``segment_size`` bytes, so a segment
    ends at the first record boundary at or past the size. Appended records are durable after
    ``sync()``. ``restore(position)`` puts the directory back to a position saved earlier: the
    segment is cut there and later segments are removed (they hold only records past it).
    """

    def __init__(self, directory: Path, segment_size: int, now: Callable[[], float]) -> None:
        self._dir = directory
        self._limit = segment_size
        self._now = now
        self._segment: Segment | None = None
        self._fd = -1
        self._offset = 0
        self._dirty = False

    @property
    def position(self) -> Position:
        assert self._segment is not None, "no segment open"
        return Position(self._segment.name, self._offset)

    @property
    def segment(self) -> Segment | None:
        return self._segment

    def start(self) -> None:
        """Begin a fresh directory with segment 0."""
        self._open_new(0)

    def restore(self, position: Position) -> None:
        self.close()
        segments = list_segments(self._dir)
        segment = next((s for s in segments if s.name == position.segment), None)
        if segment is None:
            raise BinlogFileError(f"{self._dir}: segment {position.segment} is missing")
        later = [s for s in segments if s.index > segment.index]
        fd = os.open(segment.path, os.O_WRONLY)
        try:
            size = os.fstat(fd).st_size
            if size < position.offset:
                raise BinlogFileError(
                    f"{segment.path} has {size} bytes where {position.offset} were written"
                )
            if size > position.offset:
                log.warning(
                    "%s: dropping %d bytes past %d",
                    segment.path,
                    size - position.offset,
                    position.offset,
                )
                os.ftruncate(fd, position.offset)
                os.fsync(fd)
            for s in later:
                log.warning("%s: removing a segment past %s", s.path, position.segment)
                os.unlink(s.path)
        except BaseException:
            os.close(fd)
            raise
        if later:
            fsync_directory(self._dir)
        self._segment, self._fd, self._offset = segment, fd, position.offset

    def append(self, records: Sequence[bytes]) -> None:
        buf: list[bytes] = []
        size = 0
        for record in records:
            if self._offset + size >= self._limit and self._offset + size > 0:
                self._write(b"".join(buf))
                buf, size = [], 0
                self._rotate()
            buf.append(record)
            size += len(record)
        if buf:
            self._write(b"".join(buf))

    def sync(self) -> None:
        if self._dirty:
            os.fdatasync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self._fd, view, self._offset)
            self._offset += n
            view = view[n:]
            self._dirty = True

    def _rotate(self) -> None:
        assert self._segment is not None
        self.sync()
        self.close()
        self._open_new(self._segment.index + 1)

    def _open_new(self, index: int) -> None:
        name = segment_name(index, dt.datetime.fromtimestamp(self._now()))
        path = self._dir / name
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._segment, self._offset, self._dirty = Segment(path, index), 0, False
        fsync_directory(self._dir)
