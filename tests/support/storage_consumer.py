"""A consumer of a storage sink's files that rebuilds the upstream through a sink, following
TiCDC's documented layout (``tributary.sinks.storage.reader`` says the rules). It reads through
the sink's store: a directory for ``file://``, the S3 API (botocore) for ``s3://``.

Each round: read ``metadata``'s checkpoint C first, then scan the directory. DDLs are the schema
files with a query, at their version. Per table, data files are read in their order (version,
date, number); a file whose rows are all above C waits, with every later file of its table,
for a round where C has passed them (a file holding any row at or below C was written before
C was, so everything before it is in the scan too). A row whose commit ts is at or below the
highest one read from the table's earlier files is a replay after a crash and is dropped
(``duplicates`` counts them), as TiCDC's storage consumer does. Then every DDL and row at or
below C is applied in commit ts order, one transaction per commit ts (a DDL alone), into the
sink, in safe mode: a CSV ``U`` record holds the new row only and goes in as a REPLACE.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from tributary.change import Ddl, RowChange, Txn
from tributary.sinks import Sink
from tributary.sinks.storage import reader
from tributary.sinks.storage.settings import StorageSettings
from tributary.sinks.storage.store import open_store

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Event:
    commit_ts: int
    seq: int
    row: RowChange | None = field(compare=False, default=None)
    ddl: Ddl | None = field(compare=False, default=None)


class StorageConsumer:
    def __init__(self, settings: StorageSettings, sink: Sink) -> None:
        self.store = open_store(settings)
        self.settings = settings
        self.sink = sink
        sink.safe_mode = True
        self.read: list[str] = []  # data files read, in the order read
        self.ddls: list[str] = []  # the schema files of DDLs taken
        self.seen: dict[tuple[str, str], int] = {}  # highest commit ts read per table
        self.pending: list[_Event] = []
        self.applied_ts = 0  # everything at or below it is applied
        self.applied_rows = 0
        self.duplicates = 0  # rows dropped as replays
        self._seq = 0

    async def run(self, stop: asyncio.Event, interval: float = 0.3) -> None:
        while not stop.is_set():
            await self.step()
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except TimeoutError:
                pass

    def _add(self, ts: int, row: RowChange | None = None, ddl: Ddl | None = None) -> None:
        self._seq += 1
        self.pending.append(_Event(ts, self._seq, row, ddl))

    async def step(self) -> None:
        # before the scan: see the module's doc
        checkpoint = await asyncio.to_thread(reader.checkpoint, self.store)
        if checkpoint is None:
            return
        scan = await asyncio.to_thread(reader.scan, self.store, self.settings)
        for schema_file in scan.schemas.values():
            d = schema_file.definition
            if d.query and schema_file.relative not in self.ddls:
                self.ddls.append(schema_file.relative)
                self._add(d.table_version, ddl=Ddl(d.schema, d.query, d.table))
        tables: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
        for place, relative in scan.data:
            tables[(place.schema, place.table)].append((place.version, relative))
        for key, files in tables.items():
            await asyncio.to_thread(self._read_table, key, files, scan, checkpoint)
        ready = sorted(e for e in self.pending if e.commit_ts <= checkpoint)
        self.pending = [e for e in self.pending if e.commit_ts > checkpoint]
        txns: list[Txn] = []
        rows: list[RowChange] = []
        for i, e in enumerate(ready):
            if e.ddl is not None:
                txns.append(Txn(e.commit_ts, ddl=e.ddl))
                continue
            assert e.row is not None
            rows.append(e.row)
            if i + 1 == len(ready) or ready[i + 1].commit_ts != e.commit_ts:
                txns.append(Txn(e.commit_ts, rows=tuple(rows)))
                rows = []
        if txns:
            await self.sink.apply(txns)
            self.applied_rows += sum(len(t.rows) for t in txns)
        self.applied_ts = max(self.applied_ts, checkpoint)

    def _read_table(
        self,
        key: tuple[str, str],
        files: list[tuple[int, str]],
        scan: reader.Scan,
        checkpoint: int,
    ) -> None:
        for version, relative in files:
            if relative in self.read:
                continue
            schema_file = scan.schemas.get((*key, version))
            if schema_file is None:
                return  # its schema file came after the scan passed it: next round
            rows = list(
                reader.read_rows(self.store, relative, schema_file.definition, self.settings)
            )
            if rows and min(ts for ts, _ in rows) > checkpoint:
                return  # this file and the table's later ones wait for the checkpoint
            self.read.append(relative)
            floor = self.seen.get(key, 0)
            for ts, row in rows:
                if ts <= floor:
                    self.duplicates += 1
                else:
                    self._add(ts, row=row)
            if rows:
                self.seen[key] = max(floor, max(ts for ts, _ in rows))
