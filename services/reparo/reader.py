"""The transactions of a binlog directory within a commit-ts range, in order, each once.

Segments hold increasing commit ts, so a segment can be skipped when the next one starts at or
before ``start_ts``: with first commit ts [100, 200, 300] and start 250, reading begins in the
second segment (everything in the first is below 200). Reading ends at the first record past
``stop_ts`` and, when the file sink's savepoint is there, at its position: records past it
belong to a batch that was not checkpointed. A record that does not advance the commit ts (a
tidb-binlog drainer may write some twice after a crash) is skipped with a warning. A torn tail
of the last segment ends the reading with a warning naming the file and offset.

``ReadProgress`` (optional) follows the bytes read of the bytes to read (the segments from the
first one read on, whole): a size estimate of how far the replay is.

Invariant: the transactions come out with strictly increasing commit ts, all within
``[start_ts, stop_ts]`` (``stop_ts`` 0 = no end).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tributary.change import Txn
from tributary.sinks import SinkError
from tributary.sinks.file.binlogfile import (
    Segment,
    Torn,
    list_segments,
    read_directory,
    scan_segment,
)
from tributary.sinks.file.pbcodec import PbCodecError, commit_ts_of, from_pb, parse_record
from tributary.sinks.file.sink import load_savepoint

log = logging.getLogger(__name__)


class ReparoError(SinkError):
    """The data directory cannot be replayed."""


def first_commit_ts(segment: Segment) -> int | None:
    """The commit ts of the first record of ``segment``; None when it has none."""
    for item in scan_segment(segment):
        if isinstance(item, Torn):
            return None
        try:
            return commit_ts_of(item.payload)
        except PbCodecError as e:
            raise ReparoError(f"{segment.path} at offset {item.offset}: {e}") from e
    return None


def first_segment(segments: list[Segment], start_ts: int) -> int:
    """The index of the segment reading starts in: the last one starting at or before
    ``start_ts`` (empty segments tell nothing and are passed over)."""
    first = segments[0].index
    for segment in segments:
        ts = first_commit_ts(segment)
        if ts is None:
            continue
        if ts > start_ts:
            break
        first = segment.index
    return first


@dataclass
class ReadProgress:
    """Bytes read of the bytes to read; updated by ``read_txns`` as it goes."""

    total: int = 0
    done: int = 0
    _base: dict[int, int] = field(default_factory=dict)  # segment index -> bytes before it

    def plan(self, segments: list[Segment]) -> None:
        for segment in segments:
            self._base[segment.index] = self.total
            try:
                self.total += segment.path.stat().st_size
            except OSError:
                pass  # gone or unreadable: reading it reports the error

    def at(self, segment: Segment, end: int) -> None:
        self.done = self._base.get(segment.index, self.done) + end

    def fraction(self) -> float | None:
        return min(1.0, self.done / self.total) if self.total else None


def read_txns(
    directory: Path, start_ts: int = 0, stop_ts: int = 0, progress: ReadProgress | None = None
) -> Iterator[Txn]:
    if not directory.is_dir():
        raise ReparoError(f"data-dir {directory} is not a directory")
    segments = list_segments(directory)
    if not segments:
        raise ReparoError(f"no binlog files in {directory}")
    savepoint = load_savepoint(directory)
    begin = first_segment(segments, start_ts)
    upto = savepoint.position if savepoint is not None else None
    if progress is not None:
        progress.plan([s for s in segments if s.index >= begin])
    last = 0
    for item in read_directory(directory, first_index=begin, upto=upto):
        if isinstance(item, Torn):
            log.warning(
                "%s: torn record at offset %d: stopping there", item.segment.path, item.offset
            )
            return
        if progress is not None:
            progress.at(item.segment, item.end)
        where = f"{item.segment.path} at offset {item.offset}"
        try:
            binlog = parse_record(item.payload)
            ts = int(binlog.commit_ts)
            if ts < start_ts:
                continue
            if stop_ts and ts > stop_ts:
                return
            if ts <= last:
                log.warning("%s: commit ts %d does not follow %d: skipped", where, ts, last)
                continue
            txn = from_pb(binlog)
        except PbCodecError as e:
            raise ReparoError(f"{where}: {e}") from e
        last = ts
        yield txn
