"""Value-log segments on disk: positions, and reading them back record by record.

:func:`scan_segment` checks an unfinalized segment at open (where do good
records end, what is its largest ts, what was damaged). :func:`scan_records`
reads records from a position on, for the index/sorter catch-up at restart.

Invariant: only records whose CRC checks out are returned; every damaged span
is logged with its offsets and counted once per scan.
"""

from __future__ import annotations

import logging
import mmap
from collections.abc import Generator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from services.pump.storage.record import Corrupt, Found, ScanEvent, scan
from tributary.wire.peek import MalformedBinlog, peek

log = logging.getLogger(__name__)


class Pointer(NamedTuple):
    """A position in the value log: segment id and byte offset (ordered as a tuple)."""

    fid: int
    offset: int


@dataclass(slots=True)
class Segment:
    fid: int
    path: Path
    size: int  # bytes of records (the footer excluded)
    max_ts: int
    finalized: bool


Span = tuple[int, int, int]  # damaged bytes: (fid, start, end)


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What a check of one unfinalized segment found."""

    good_end: int = 0
    max_ts: int = 0
    records: int = 0
    corrupt: tuple[Span, ...] = ()
    torn_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Scanned:
    """A good record read back: where it is, its framed size, its payload."""

    fid: int
    offset: int
    size: int
    payload: bytes


def _events(path: Path, start: int, limit: int) -> Generator[ScanEvent, None, None]:
    if limit <= start:
        return
    with path.open("rb") as f, mmap.mmap(f.fileno(), limit, access=mmap.ACCESS_READ) as mm:
        with closing(scan(mm, start, limit)) as events:
            yield from events


def scan_segment(path: Path, fid: int, size: int) -> ScanResult:
    """Check a whole unfinalized segment of ``size`` bytes."""
    good_end = max_ts = records = torn = 0
    corrupt: list[Span] = []
    with closing(_events(path, 0, size)) as events:
        for ev in events:
            if isinstance(ev, Found):
                records += 1
                good_end = ev.end
                max_ts = max(max_ts, _ts(ev.payload, fid, ev.offset))
            elif isinstance(ev, Corrupt):
                corrupt.append((fid, ev.offset, ev.end))
                good_end = ev.end
            else:
                torn = ev.limit - ev.offset
                log.warning(
                    "value log %06d: torn tail [%d, %d) truncated", fid, ev.offset, ev.limit
                )
    return ScanResult(good_end, max_ts, records, tuple(corrupt), torn)


def _ts(payload: bytes, fid: int, offset: int) -> int:
    try:
        return peek(payload).ts
    except MalformedBinlog:
        log.error("value log %06d@%d: record is not a binlog", fid, offset)
        return 0


def scan_records(
    segments: Sequence[Segment], start: Pointer, max_bytes: int
) -> tuple[list[Scanned], Pointer | None, list[Span]]:
    """Good records from ``start`` on, about ``max_bytes`` of them; the position to
    continue from (None at the end of the log); the damaged spans passed over."""
    out: list[Scanned] = []
    corrupt: list[Span] = []
    taken = 0
    for seg in segments:
        if seg.fid < start.fid:
            continue
        offset = start.offset if seg.fid == start.fid else 0
        with closing(_events(seg.path, offset, seg.size)) as events:
            for ev in events:
                if isinstance(ev, Found):
                    out.append(Scanned(seg.fid, ev.offset, ev.end - ev.offset, ev.payload))
                    taken += ev.end - ev.offset
                    if taken >= max_bytes:
                        return out, Pointer(seg.fid, ev.end), corrupt
                else:
                    end = ev.end if isinstance(ev, Corrupt) else ev.limit
                    corrupt.append((seg.fid, ev.offset, end))
    return out, None, corrupt
