"""The storage sink: TiCDC's cloud storage sink on a directory (``file:///DIR?protocol=csv``)
or an S3 bucket prefix (``s3://BUCKET/PREFIX?protocol=csv&endpoint=...``).

Rows are encoded as they are submitted (CSV or canal-json, one line each) into a buffer per
table version, and written as files (``layout``) into the store (``store``: ``files`` for a
directory, ``s3`` for a bucket): every ``flush-interval`` all the
buffers, at once a buffer that reached ``file-size`` (after a whole transaction: a
transaction's rows of one table are always in one file), and everything before a DDL. Up to
``worker-count`` files are written at the same time. A DDL's schema file is written once every
row before it is (``versions``).

The sink is pipelined (``sinks.port.Pipelined``): ``submit`` returns once the rows are buffered, and
``checkpoint`` moves only when the files holding them are durable (written, fsynced, linked in,
directory fsynced; on S3, the PUT answered): to the last submitted commit ts when nothing is
buffered any more, else to just below the oldest buffered one. So the capture's checkpoint, which
follows it, never passes a row that is not in a complete file. After every full flush the
``metadata`` file gets ``{"checkpoint-ts": ...}`` with it, atomically. On open the sink's checkpoint
is that file's: a replay at or below it is dropped (it is in files already).

What a crash (SIGKILL) leaves, and what holds after it:

* no partial file anywhere: data and schema files appear whole (``Store.create``; in a
  directory ``.tmp/`` is emptied on open, on S3 a PUT is atomic);
* no file is ever overwritten: a new file takes a number after the ones the index file and
  the directory show, and creation fails instead of replacing (a hard link in a directory, a
  conditional PUT with ``If-None-Match: *`` on S3);
* every row at or below ``metadata``'s checkpoint is in a file; rows above it that were written
  before the crash are written again after the restart, in new files (at-least-once, as TiCDC
  documents), with the same commit ts: a consumer keeps, per table, only rows whose commit ts
  is above the last one it read from earlier files (``include-commit-ts`` or canal-json's
  ``enable-tidb-extension`` are needed for that).

Example (flush-interval 5s): transactions 100 (items, orders) and 110 (items) are submitted at
t=1s; the checkpoint stays None. At t=5s both files are written and the checkpoint is 110, then
``metadata`` says 110. If the process is killed between the two files, neither the checkpoint
nor ``metadata`` moved: after the restart 100 and 110 are submitted again and written in new
files (the one file that made it holds rows a consumer skips as already seen).

One changefeed per directory: the checkpoint is the directory's, so a changefeed started
below it skips what the directory already holds.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import TracebackType
from urllib.parse import SplitResult

from tributary.change import RowChange, TableInfo, Txn
from tributary.sinks.kafka.canal import Columns, encode_row
from tributary.sinks.kafka.openproto import ddl_action
from tributary.sinks.port import SinkError, SinkOptions, WriteGate, WriteRefused, pending
from tributary.sinks.storage.csvcodec import CsvEncoder
from tributary.sinks.storage.layout import (
    INDEX_FILE,
    METADATA,
    LayoutError,
    check_name,
    data_dir,
    data_file_name,
    date_text,
    metadata_json,
)
from tributary.sinks.storage.settings import StorageSettings, parse_url
from tributary.sinks.storage.split import split_updates
from tributary.sinks.storage.store import Store, UnsafeStore, next_index, open_store
from tributary.sinks.storage.versions import TableVersions

log = logging.getLogger(__name__)

Key = tuple[str, str, int]  # (schema, table, version)


@dataclass(slots=True)
class _Buffer:
    first_ts: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    schema_file: tuple[str, bytes] | None = None  # written before the version's first file


def read_checkpoint(store: Store) -> int | None:
    """The checkpoint ``metadata`` holds in ``store``; None when there is none."""
    where = f"{store.location}/{METADATA}"
    try:
        data = store.read(PurePosixPath(METADATA))
        if data is None:
            return None
        doc = json.loads(data)
    except (OSError, ValueError) as e:
        raise SinkError(f"storage sink: cannot read {where}: {e}", retriable=True) from e
    ts = doc.get("checkpoint-ts") if isinstance(doc, dict) else None
    if not isinstance(ts, int) or ts < 0:
        raise SinkError(f"storage sink: {where} holds no checkpoint-ts", retriable=False)
    return ts or None


class StorageSink:
    """Pipelined; ``safe_mode`` has no effect; ``write_gate`` is asked before each file."""

    def __init__(
        self,
        settings: StorageSettings,
        files: Store,
        checkpoint: int | None,
        now: Callable[[], dt.datetime],
        safe_mode: bool = False,
    ) -> None:
        self.settings = settings
        self.safe_mode = safe_mode
        self.write_gate: WriteGate | None = None
        self._files = files
        self._now = now
        self._durable = checkpoint  # every row at or below it is in a complete file
        self._metadata = checkpoint or 0  # what ``metadata`` says
        self._submitted = checkpoint  # the last commit ts handed in
        self._versions = TableVersions(self._list_meta, checkpoint or 0)
        self._buffers: dict[Key, _Buffer] = {}
        self._next: dict[PurePosixPath, int] = {}  # data directory -> next file number
        self._csv = CsvEncoder(settings.csv, settings.terminator)
        self._canal: dict[TableInfo, Columns] = {}
        self._lock = asyncio.Lock()
        self._failure: BaseException | None = None
        self._closed = False
        self._pool = ThreadPoolExecutor(settings.worker_count, thread_name_prefix="storage-sink")
        self._ticker: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        settings: StorageSettings,
        *,
        now: Callable[[], dt.datetime] = dt.datetime.now,
        safe_mode: bool = False,
    ) -> StorageSink:
        files = open_store(settings)
        root = files.location
        try:
            await asyncio.to_thread(files.open)
        except UnsafeStore as e:
            raise SinkError(f"storage sink: {e}", retriable=False) from e
        except OSError as e:
            raise SinkError(f"storage sink: cannot open {root}: {e}", retriable=True) from e
        checkpoint = await asyncio.to_thread(read_checkpoint, files)
        sink = cls(settings, files, checkpoint, now, safe_mode)
        sink._ticker = asyncio.create_task(sink._tick(), name=f"storage-sink-flush-{root}")
        log.info(
            "storage sink %s opened at checkpoint %s (%s)", root, checkpoint, settings.protocol
        )
        return sink

    async def __aenter__(self) -> StorageSink:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- the Sink and Pipelined ports --------------------------------------------------------

    async def checkpoint(self) -> int | None:
        return self._durable

    async def apply(self, txns: Sequence[Txn]) -> None:
        await self.submit(txns)
        await self.flush()

    async def submit(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            self._check()
            floor = max(self._durable or 0, self._submitted or 0)
            for txn in pending(txns, floor or None):
                if txn.ddl is not None:
                    await self._ddl(txn)
                elif txn.rows:
                    await self._rows(txn)
                self._submitted = txn.commit_ts
            if not any(b.chunks for b in self._buffers.values()):
                self._durable = self._submitted

    async def flush(self) -> None:
        """Write every buffer now; the checkpoint is then the last submitted commit ts."""
        async with self._lock:
            self._check()
            await self._flush_all()

    async def close(self) -> None:
        """Stop; what is still buffered is dropped (the checkpoint never passed it)."""
        self._closed = True
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
        async with self._lock:
            await asyncio.to_thread(self._pool.shutdown)

    # -- rows and DDLs -----------------------------------------------------------------------

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise SinkError("storage sink is closed", retriable=True)

    async def _rows(self, txn: Txn) -> None:
        ts = txn.commit_ts
        groups: dict[tuple[str, str, TableInfo], list[RowChange]] = {}
        for r in txn.rows:
            groups.setdefault((r.table.schema, r.table.table, r.table), []).append(r)
        full: list[Key] = []
        for (schema, table, info), rows in groups.items():
            try:
                placed = self._versions.place(info, ts)
            except LayoutError as e:
                raise SinkError(f"storage sink: {e}", retriable=False) from e
            key = (schema, table, placed.version)
            buf = self._buffers.get(key)
            if buf is None or not buf.chunks:
                buf = self._buffers[key] = _Buffer(ts, schema_file=buf.schema_file if buf else None)
            if placed.schema_file is not None:
                buf.schema_file = placed.schema_file
            for change in split_updates(rows):
                data = self._encode(change, ts)
                buf.chunks.append(data)
                buf.size += len(data)
            if buf.size >= self.settings.file_size:
                full.append(key)
        buffered = sum(b.size for b in self._buffers.values())
        if buffered >= 2 * self.settings.file_size:
            await self._flush_all()
        elif full:
            await self._write(full)
            self._durable = self._durable_after()

    def _encode(self, change: RowChange, ts: int) -> bytes:
        if self.settings.protocol == "csv":
            return self._csv.encode(change, ts).encode()
        cols = self._canal.get(change.table)
        if cols is None:
            cols = self._canal[change.table] = Columns.of(change.table)
        line = encode_row(change, ts, cols, extension=self.settings.tidb_extension)
        return line + self.settings.terminator.encode()

    async def _ddl(self, txn: Txn) -> None:
        ddl = txn.ddl
        assert ddl is not None
        await self._flush_all()
        if not ddl.schema:
            log.warning(
                "storage sink: DDL at %d has no database, no schema file: %s",
                txn.commit_ts,
                ddl.query,
            )
        else:
            try:
                path, doc = self._versions.ddl(ddl, txn.commit_ts, ddl_action(ddl.query))
            except LayoutError as e:
                raise SinkError(f"storage sink: {e}", retriable=False) from e
            await self._run(self._create_once, PurePosixPath(path), doc)
        self._durable = txn.commit_ts
        await self._write_metadata()

    # -- writing -----------------------------------------------------------------------------

    def _durable_after(self) -> int | None:
        """Every row below the oldest one still buffered is in a file."""
        firsts = [b.first_ts for b in self._buffers.values() if b.chunks]
        if not firsts:
            return self._submitted
        return max(self._durable or 0, min(firsts) - 1) or None

    async def _flush_all(self) -> None:
        await self._write([k for k, b in self._buffers.items() if b.chunks])
        self._durable = self._submitted
        await self._write_metadata()

    async def _write_metadata(self) -> None:
        ts = self._durable
        if ts is not None and ts > self._metadata:
            await self._run(self._replace, PurePosixPath(METADATA), metadata_json(ts))
            self._metadata = ts

    async def _write(self, keys: list[Key]) -> None:
        """The files of these buffers, up to ``worker-count`` at a time; the buffers empty."""
        if not keys:
            return
        jobs = []
        for key in keys:
            buf = self._buffers[key]
            data = b"".join(buf.chunks)
            jobs.append(self._run(self._write_table, key, data, buf.schema_file))
        results = await asyncio.gather(*jobs, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            self._failure = failed[0]
            raise failed[0]
        for key in keys:
            self._buffers[key] = _Buffer(0)

    async def _run(self, fn: Callable[..., object], *args: object) -> object:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, fn, *args)
        except WriteRefused as e:
            self._failure = e
            raise
        except OSError as e:
            self._failure = SinkError(f"storage sink: {e}", retriable=True)
            raise self._failure from e

    def _gate(self) -> None:
        if self.write_gate is not None:
            self.write_gate()

    def _write_table(self, key: Key, data: bytes, schema_file: tuple[str, bytes] | None) -> None:
        """One data file (blocking): the version's schema file first if it is new, then the
        index file naming the data file, then the data file."""
        schema, table, version = key
        s = self.settings
        if schema_file is not None:
            self._create_once(PurePosixPath(schema_file[0]), schema_file[1])
        directory = data_dir(schema, table, version, date_text(s.date_separator, self._now()))
        n = self._next.get(directory) or next_index(self._files, directory, s.extension)
        while True:
            name = data_file_name(n, s.extension, s.file_index_width)
            self._replace(directory / INDEX_FILE, f"{name}\n".encode())
            self._gate()
            if self._files.create(directory / name, data):
                break
            n += 1  # taken (another writer, or a file the index did not name): the next one
        self._next[directory] = n + 1
        buf = self._buffers.get(key)
        if buf is not None:
            buf.schema_file = None

    def _create_once(self, path: PurePosixPath, data: bytes) -> None:
        self._gate()
        self._files.create(path, data)  # already there: the same definition, kept

    def _replace(self, path: PurePosixPath, data: bytes) -> None:
        self._gate()
        self._files.replace(path, data)

    def _list_meta(self, schema: str, table: str) -> list[str]:
        return self._files.list_names(
            PurePosixPath(check_name(schema, "schema"), check_name(table, "table"), "meta")
        )

    async def _tick(self) -> None:
        """Flush every ``flush-interval`` until closed or a write fails (the next ``submit``
        or ``flush`` raises that failure)."""
        while True:
            await asyncio.sleep(self.settings.flush_interval)
            async with self._lock:
                if self._failure is not None or self._closed:
                    return
                try:
                    await self._flush_all()
                except (SinkError, WriteRefused) as e:
                    self._failure = e
                    log.warning("storage sink %s: flush failed: %s", self.settings.directory, e)
                    return


async def open_url(url: SplitResult, options: SinkOptions) -> StorageSink:
    """The opener of ``file://...?protocol=csv|canal-json`` and ``s3://...`` (``sinks.schemes``)."""
    return await StorageSink.open(parse_url(url), safe_mode=options.safe_mode)
