"""The file sink: tidb-binlog's ``file`` output, binlogfile segments of pb_binlog records.

URL ``file:///abs/dir`` (or ``file://rel/dir``, relative to the working directory), options
``segment-size`` (bytes or a size like ``64MiB``; default 512 MiB as tidb-binlog) and
``retention-time`` (days, 0 = keep forever; segments whose mtime is older are removed, at most
once an hour, never the newest).

Each transaction with rows or a DDL is one record (``sinks.file.pbcodec``). A batch is appended,
fdatasync'ed, and then the savepoint file ``sink.checkpoint`` in the same directory is replaced
atomically (temporary file, fsync, rename, fsync of the directory). It is TOML like tidb-binlog's
file checkpoint (``consistent``, ``commitTS``, ``schema-version``) plus our ``segment`` and
``offset``: where the next record starts. Invariant: the directory holds exactly the records of
the transactions up to the checkpoint, each once. On open, bytes past the saved offset (a batch
written but not checkpointed when the process died, or a failed batch) are cut away and later
segments removed; a batch that fails part way is cut away at once.

A directory holding segments but no ``sink.checkpoint`` is what tidb-binlog's drainer leaves (its
``file`` output has its checkpoint in ``<data-dir>/savepoint``): the sink takes it over after its
last whole record, the checkpoint being that record's commit ts, and appends there, so a drainer
resuming from the sink's checkpoint writes nothing twice (``_adopt``).

Example: batches [t1 t2] and [t3] give records r1 r2 r3; if the process dies after writing r3
but before the savepoint names its end, the savepoint still says (segment, end of r2) and
reopening cuts r3: the checkpoint is t2 and the drainer sends t3 again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import SplitResult, parse_qsl

from tributary.change import Txn
from tributary.settings.parsers import parse_byte_size
from tributary.sinks.file import pbcodec
from tributary.sinks.file.binlogfile import (
    BinlogFileError,
    Position,
    Record,
    Segment,
    SegmentWriter,
    encode,
    fsync_directory,
    io_error,
    list_segments,
    scan_segment,
)
from tributary.sinks.port import SinkError, SinkOptions, pending
from tributary.sinks.urls import refuse_unknown_options

log = logging.getLogger(__name__)

SAVEPOINT = "sink.checkpoint"
DEFAULT_SEGMENT_SIZE = 512 << 20
GC_INTERVAL = 3600.0  # seconds between two retention sweeps


@dataclass(frozen=True, slots=True)
class Savepoint:
    commit_ts: int  # 0: nothing applied yet
    position: Position
    schema_version: int = 0

    def render(self) -> str:
        return (
            f"consistent = true\ncommitTS = {self.commit_ts}\n"
            f"schema-version = {self.schema_version}\n"
            f'segment = "{self.position.segment}"\noffset = {self.position.offset}\n'
        )


def load_savepoint(directory: Path) -> Savepoint | None:
    """The file sink's savepoint in ``directory``; None if there is none."""
    path = directory / SAVEPOINT
    try:
        doc = tomllib.loads(path.read_text())
        ts, segment, offset = doc["commitTS"], doc["segment"], doc["offset"]
        version = doc.get("schema-version", 0)
        if not all(isinstance(v, int) and v >= 0 for v in (ts, offset, version)):
            raise ValueError("commitTS, offset and schema-version must be integers >= 0")
        if not isinstance(segment, str):
            raise ValueError("segment must be a file name")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise io_error(f"cannot read {path}", e) from e
    except (tomllib.TOMLDecodeError, KeyError, ValueError) as e:
        raise BinlogFileError(f"{path}: not a file sink savepoint: {e}") from e
    return Savepoint(ts, Position(segment, offset), version)


def save_savepoint(directory: Path, savepoint: Savepoint) -> None:
    fd, tmp = tempfile.mkstemp(prefix=SAVEPOINT + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(savepoint.render())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / SAVEPOINT)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_directory(directory)


class FileSink:
    """Writes batches as pb_binlog records; ``safe_mode`` has no effect (kept for the protocol)."""

    def __init__(
        self,
        directory: Path,
        writer: SegmentWriter,
        saved: Savepoint,
        retention: float,
        clock: Callable[[], float],
        safe_mode: bool,
    ) -> None:
        self.directory = directory
        self._writer = writer
        self._saved = saved
        self._retention = retention
        self._clock = clock
        self._last_gc: float | None = None
        self._lock = threading.Lock()  # one batch at a time, also past a cancelled apply
        self._closed = False
        self.safe_mode = safe_mode

    @classmethod
    async def open(
        cls,
        directory: str | Path,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        retention_days: float = 0.0,
        clock: Callable[[], float] = time.time,
        safe_mode: bool = False,
    ) -> FileSink:
        if segment_size <= 0 or retention_days < 0:
            raise SinkError("file sink: segment-size must be > 0 and retention-time >= 0")
        path = Path(directory)
        writer = SegmentWriter(path, segment_size, clock)
        saved = await asyncio.to_thread(_recover, path, writer)
        sink = cls(path, writer, saved, retention_days * 86400, clock, safe_mode)
        await asyncio.to_thread(sink._maybe_gc)
        log.info("file sink %s opened at checkpoint %s", path, saved.commit_ts or None)
        return sink

    async def __aenter__(self) -> FileSink:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def checkpoint(self) -> int | None:
        return self._saved.commit_ts or None

    async def apply(self, txns: Sequence[Txn]) -> None:
        await asyncio.to_thread(self._apply, list(txns))

    def _apply(self, txns: list[Txn]) -> None:
        with self._lock:
            if self._closed:
                raise SinkError("file sink is closed")
            todo = pending(txns, self._saved.commit_ts or None)
            if not todo:
                return
            records = [encode(p) for t in todo if (p := pbcodec.encode_txn(t)) is not None]
            version = max([self._saved.schema_version] + [t.schema_version for t in todo])
            try:
                self._writer.append(records)
                self._writer.sync()
                saved = Savepoint(todo[-1].commit_ts, self._writer.position, version)
                save_savepoint(self.directory, saved)
            except OSError as e:
                self._rewind()
                raise io_error(f"file sink: batch up to commit ts {todo[-1].commit_ts}", e) from e
            self._saved = saved
            try:
                self._maybe_gc()
            except BinlogFileError as e:
                log.warning("file sink %s: retention sweep failed: %s", self.directory, e)

    def _rewind(self) -> None:
        """Cut a failed batch away; if even that fails, the sink refuses further batches."""
        try:
            self._writer.restore(self._saved.position)
        except (OSError, BinlogFileError):
            log.exception("file sink %s: cannot cut a failed batch away", self.directory)
            self._closed = True
            self._writer.close()

    def _maybe_gc(self) -> None:
        now = self._clock()
        if self._retention <= 0 or (
            self._last_gc is not None and now - self._last_gc < GC_INTERVAL
        ):
            return
        self._last_gc = now
        current = self._writer.segment
        for segment in list_segments(self.directory)[:-1]:
            if current is not None and segment.index >= current.index:
                continue
            try:
                if segment.path.stat().st_mtime < now - self._retention:
                    log.info("file sink: removing %s (past the retention time)", segment.path)
                    segment.path.unlink()
            except OSError as e:
                log.warning("file sink: cannot remove %s: %s", segment.path, e)

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            self._writer.close()


def _recover(directory: Path, writer: SegmentWriter) -> Savepoint:
    """Open ``directory`` at its savepoint, cutting away what was written past it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        saved = load_savepoint(directory)
        if saved is not None:
            writer.restore(saved.position)
            return saved
        segments = list_segments(directory)
        adopted = _adopt(segments)
        if adopted is not None:
            writer.restore(adopted.position)
            save_savepoint(directory, adopted)
            return adopted
        for s in segments:  # empty leftovers of a first open that died before its savepoint
            s.path.unlink()
        writer.start()
        saved = Savepoint(0, writer.position)
        save_savepoint(directory, saved)
        return saved
    except OSError as e:
        writer.close()
        raise io_error(f"file sink: cannot open {directory}", e) from e
    except BaseException:
        writer.close()
        raise


def _adopt(segments: Sequence[Segment]) -> Savepoint | None:
    """The savepoint of segments written without one (tidb-binlog's drainer writes its ``file``
    output so, into its data-dir by default): after their last whole record, at its commit ts.

    The newest segment holding a whole record is scanned; a torn tail after it (a writer that
    died mid-append) is where the next record goes, and emptier segments after it are dropped
    by ``restore``. None when no segment holds a record. Example: segments 0 [r1 r2] and
    1 [r3, 40 torn bytes], then an empty 2: the savepoint is (segment 1, end of r3) at r3's
    commit ts, and reopening there cuts the torn bytes and removes segment 2.
    """
    for segment in reversed(segments):
        last: Record | None = None
        end = 0
        for item in scan_segment(segment):
            if isinstance(item, Record):
                last, end = item, item.end
        if last is None:
            continue
        try:
            commit_ts = pbcodec.commit_ts_of(last.payload)
        except pbcodec.PbCodecError as e:
            raise BinlogFileError(
                f"{segment.path.parent} holds binlog segments but no {SAVEPOINT}, and the last "
                f"record ({segment.name} offset {last.offset}) is not a pb_binlog record ({e}): "
                "not a file sink's directory; move the segments away to start afresh"
            ) from e
        log.warning(
            "file sink: %s holds binlog files but no %s (tidb-binlog's drainer writes its "
            "output so): continuing after their last record, commit ts %d, %s offset %d",
            segment.path.parent,
            SAVEPOINT,
            commit_ts,
            segment.name,
            end,
        )
        return Savepoint(commit_ts, Position(segment.name, end))
    return None


def _options(url: SplitResult) -> tuple[int, float]:
    refuse_unknown_options("file", url, ("segment-size", "retention-time"))
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    try:
        size = parse_byte_size(query.get("segment-size", DEFAULT_SEGMENT_SIZE))
        days = float(query.get("retention-time", 0))
        if not math.isfinite(days):
            raise ValueError(f"retention-time must be a number of days, got {days}")
    except ValueError as e:
        raise SinkError(f"file sink URL {url.geturl()!r}: {e}") from e
    return size, days


async def open_url(url: SplitResult, options: SinkOptions) -> FileSink:
    """The ``file://`` opener for ``sinks.schemes``."""
    path = url.netloc + url.path
    if not path:
        raise SinkError(f"file sink URL has no directory: {url.geturl()!r}")
    size, days = _options(url)
    return await FileSink.open(
        path, segment_size=size, retention_days=days, safe_mode=options.safe_mode
    )
