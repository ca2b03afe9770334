"""The value log: numbered segment files ``<dir>/%06d.vlog`` of framed binlog records.

Blocking file I/O; the storage calls it from worker threads. One thread
appends (:meth:`ValueLog.append`, :meth:`ValueLog.rollback`); others may read
and scan concurrently.

Invariants:
- an append is all or nothing: on any error the segment is cut back to its
  length before the batch, so a failed batch leaves no record behind;
- with ``sync`` the records are on disk (fdatasync) before ``append`` returns;
- only the newest segment is written; an older one ends with a footer holding
  the largest ts stored in it (rotation writes it before the next segment is used);
- after :meth:`ValueLog.open` the newest segment ends at its last good record
  (a torn tail left by a crash is truncated), so new appends follow good data.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.pump.storage.record import FOOTER_SIZE, decode, decode_footer, encode_batch
from services.pump.storage.record import encode_footer as footer
from services.pump.storage.segment import (
    Pointer,
    Scanned,
    ScanResult,
    Segment,
    Span,
    scan_records,
    scan_segment,
)

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{6,})\.vlog$")


@dataclass(frozen=True, slots=True)
class Appended:
    """Where a batch went, how long it took, and what to restore to undo it."""

    fid: int
    offsets: list[int]
    sizes: list[int]
    to_disk: float
    fsync: float
    rotate: float
    pre_size: int
    pre_max_ts: int


class ValueLog:
    def __init__(self, directory: Path, segments: list[Segment], segment_size: int, sync: bool):
        self._dir = directory
        self._damaged: dict[Span, None] = {}  # every damaged span seen, in order found
        self.torn_bytes = 0
        self._segment_size = segment_size
        self._sync = sync
        self._lock = threading.Lock()  # guards self._segments (GC vs. rotation vs. readers)
        self._segments = {s.fid: s for s in segments}
        self._active = segments[-1]
        self._fd = os.open(self._active.path, os.O_WRONLY | os.O_CREAT, 0o644)

    @classmethod
    def open(cls, directory: Path, segment_size: int, sync: bool = True) -> ValueLog:
        """Open (creating) the value log, repairing unfinalized segments."""
        directory.mkdir(parents=True, exist_ok=True)
        fids = sorted(int(m[1]) for p in directory.iterdir() if (m := _NAME.match(p.name)))
        segments: list[Segment] = []
        results: list[ScanResult] = []
        for i, fid in enumerate(fids):
            seg, result = _load(directory, fid, last=i == len(fids) - 1)
            segments.append(seg)
            results.append(result)
        if not segments or segments[-1].finalized:
            fid = segments[-1].fid + 1 if segments else 0
            segments.append(_create(directory, fid))
        vlog = cls(directory, segments, segment_size, sync)
        for r in results:
            vlog._note_damage(r.corrupt)
            vlog.torn_bytes += r.torn_bytes
        return vlog

    @property
    def damaged(self) -> list[Span]:
        """Damaged spans skipped so far (each counted once)."""
        return list(self._damaged)

    def _note_damage(self, spans: Sequence[Span]) -> None:
        for span in spans:
            if span not in self._damaged:
                self._damaged[span] = None
                log.warning("value log %06d: corrupt bytes [%d, %d) skipped", *span)

    def scan_from(self, start: Pointer, max_bytes: int) -> tuple[list[Scanned], Pointer | None]:
        """Good records from ``start`` on (about ``max_bytes``) and where to continue."""
        records, nxt, damaged = scan_records(self.segments(), start, max_bytes)
        self._note_damage(damaged)
        return records, nxt

    @property
    def active_fid(self) -> int:
        return self._active.fid

    def segments(self) -> list[Segment]:
        with self._lock:
            return sorted(self._segments.values(), key=lambda s: s.fid)

    def path(self, fid: int) -> Path:
        return self._dir / f"{fid:06d}.vlog"

    def append(self, payloads: Sequence[bytes], max_ts: int) -> Appended:
        """Append one batch with one write (and one fdatasync when syncing)."""
        rotate = 0.0
        if self._active.size >= self._segment_size:
            t0 = time.perf_counter()
            self._rotate()
            rotate = time.perf_counter() - t0
        seg = self._active
        buf, sizes = encode_batch(payloads)
        pre_size, pre_max = seg.size, seg.max_ts
        t0 = time.perf_counter()
        try:
            _write_all(self._fd, buf, pre_size)
            t1 = time.perf_counter()
            if self._sync:
                os.fdatasync(self._fd)
        except OSError:
            self._cut(pre_size)
            raise
        t2 = time.perf_counter()
        seg.size = pre_size + len(buf)
        seg.max_ts = max(pre_max, max_ts)
        offsets, pos = [], pre_size
        for size in sizes:
            offsets.append(pos)
            pos += size
        return Appended(seg.fid, offsets, sizes, t1 - t0, t2 - t1, rotate, pre_size, pre_max)

    def rollback(self, appended: Appended) -> None:
        """Undo the last :meth:`append` (its index transaction failed)."""
        seg = self._active
        if seg.fid != appended.fid:
            raise RuntimeError("rollback of a batch in a rotated segment")
        self._cut(appended.pre_size)
        seg.size, seg.max_ts = appended.pre_size, appended.pre_max_ts

    def _cut(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        if self._sync:
            os.fdatasync(self._fd)

    def _rotate(self) -> None:
        old = self._active
        new = _create(self._dir, old.fid + 1)
        new_fd = os.open(new.path, os.O_WRONLY)
        try:
            _write_all(self._fd, footer(old.max_ts), old.size)
            os.fdatasync(self._fd)
        except OSError:
            os.close(new_fd)
            new.path.unlink()
            self._cut(old.size)
            raise
        os.close(self._fd)
        old.finalized = True
        with self._lock:
            self._segments[new.fid] = new
        self._active, self._fd = new, new_fd
        log.info("value log rotated: segment %06d finalized (max ts %d)", old.fid, old.max_ts)

    def read_many(self, where: Sequence[tuple[int, int, int]]) -> list[bytes | None]:
        """Payloads of the records at ``(fid, offset, size)``; None where purged or corrupt."""
        fds: dict[int, int | None] = {}
        out: list[bytes | None] = []
        try:
            for fid, offset, size in where:
                if fid not in fds:
                    try:
                        fds[fid] = os.open(self.path(fid), os.O_RDONLY)
                    except FileNotFoundError:
                        fds[fid] = None
                fd = fds[fid]
                payload = decode(os.pread(fd, size, offset)) if fd is not None else None
                if payload is None:
                    log.error(
                        "value log record %06d@%d unreadable (purged or corrupt)", fid, offset
                    )
                out.append(payload)
        finally:
            for fd in fds.values():
                if fd is not None:
                    os.close(fd)
        return out

    def remove_upto(self, max_ts: int) -> list[int]:
        """Delete every finalized segment whose largest ts is <= ``max_ts``."""
        with self._lock:
            doomed = [
                s
                for s in self._segments.values()
                if s.finalized and s is not self._active and s.max_ts <= max_ts
            ]
            for s in doomed:
                del self._segments[s.fid]
        for s in doomed:
            s.path.unlink(missing_ok=True)
            log.info("value log segment %06d removed by GC (max ts %d)", s.fid, s.max_ts)
        return [s.fid for s in doomed]

    def close(self, finalize_min: int) -> None:
        """Close the writer side; give the current segment its footer if it is big enough."""
        seg = self._active
        try:
            if seg.size >= finalize_min and not seg.finalized:
                _write_all(self._fd, footer(seg.max_ts), seg.size)
                os.fdatasync(self._fd)
                seg.finalized = True
        finally:
            os.close(self._fd)


def _write_all(fd: int, buf: bytes, offset: int) -> None:
    view = memoryview(buf)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def _create(directory: Path, fid: int) -> Segment:
    path = directory / f"{fid:06d}.vlog"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)  # make the new name durable
    finally:
        os.close(dfd)
    return Segment(fid, path, 0, 0, False)


def _load(directory: Path, fid: int, last: bool) -> tuple[Segment, ScanResult]:
    path = directory / f"{fid:06d}.vlog"
    size = path.stat().st_size
    if size >= FOOTER_SIZE:
        with path.open("rb") as f:
            f.seek(size - FOOTER_SIZE)
            max_ts = decode_footer(f.read(FOOTER_SIZE))
        if max_ts is not None:
            return Segment(fid, path, size - FOOTER_SIZE, max_ts, True), ScanResult()
    result = scan_segment(path, fid, size)
    seg = Segment(fid, path, result.good_end, result.max_ts, False)
    if result.good_end < size:
        with path.open("r+b") as f:
            f.truncate(result.good_end)
            os.fsync(f.fileno())
    if not last:  # a segment left without footer by a crash during rotation
        with path.open("r+b") as f:
            f.seek(seg.size)
            f.write(footer(seg.max_ts))
            os.fsync(f.fileno())
        seg.finalized = True
    return seg, result
