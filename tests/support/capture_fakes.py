"""In-memory fakes of the capture cluster's ports: an upstream change log and a downstream.

``FakeLog`` is a ``services.capture.source.ChangeSource``: transactions appended to a list,
position tokens are indexes, commit ts fixed at append time (so replays give equal ts, as the
real source does). ``FakeDownstream`` opens ``FakeSink``s that share one store keyed by the
sink's checkpoint id, applying batches as real sinks do (``sinks.pending``), and can be
told to fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from services.capture.source import SourceFailure, SourceItem
from tributary.change import RowChange, TableFilter, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions, pending

TABLE = TableInfo.build("shop", "t", [("id", "bigint"), ("v", "varchar(20)")], ["id"])
OTHER = TableInfo.build("test", "x", [("id", "bigint")], ["id"])


class FakeLog:
    def __init__(self) -> None:
        self.txns: list[Txn] = []
        self._grew = asyncio.Condition()
        self.opened: list[tuple[str, int]] = []
        self.fail_next_open: SourceFailure | None = None

    async def append(self, n: int = 1, table: TableInfo = TABLE) -> None:
        async with self._grew:
            for _ in range(n):
                i = len(self.txns) + 1
                row = RowChange.insert(
                    table, {"id": i, "v": f"v{i}"} if table is TABLE else {"id": i}
                )
                self.txns.append(Txn(1000 + i, 1000 + i - 1 if i > 1 else 1, (row,)))
            self._grew.notify_all()

    async def append_txns(self, *txns: Txn) -> None:
        """Transactions as they are (their own commit ts, tables and rows)."""
        async with self._grew:
            self.txns.extend(txns)
            self._grew.notify_all()

    async def current_position(self) -> str:
        return str(len(self.txns))

    async def tables(self, table_filter: TableFilter | None) -> list[tuple[str, str]]:
        names = [(TABLE.schema, TABLE.table), (OTHER.schema, OTHER.table)]
        return [n for n in names if table_filter is None or table_filter.allows(*n)]

    def reached(self, position: str, end: str) -> bool:
        return int(position) >= int(end)

    @asynccontextmanager
    async def open(
        self, start: str, last_ts: int, table_filter: TableFilter | None
    ) -> AsyncIterator[AsyncIterator[SourceItem]]:
        self.opened.append((start, last_ts))
        if self.fail_next_open is not None:
            failure, self.fail_next_open = self.fail_next_open, None
            raise failure
        yield self._follow(int(start), table_filter)

    async def _follow(self, index: int, flt: TableFilter | None) -> AsyncIterator[SourceItem]:
        while True:
            async with self._grew:
                while len(self.txns) <= index:
                    await self._grew.wait()
                batch = self.txns[index:]
            for txn in batch:
                index += 1
                yield SourceItem(flt.filter(txn) if flt else txn, str(index))


@dataclass
class FakeDownstream:
    rows: dict[int, dict[int, str]] = field(default_factory=dict)  # sink id -> id -> v
    checkpoints: dict[int, int] = field(default_factory=dict)
    applied: list[int] = field(default_factory=list)  # commit ts of every txn applied
    fail: SinkError | None = None

    @asynccontextmanager
    async def open(self, uri: str, options: SinkOptions) -> AsyncIterator[FakeSink]:
        yield FakeSink(self, options.cluster_id, uri)


class FakeSink:
    safe_mode = False

    def __init__(self, store: FakeDownstream, sink_id: int, uri: str) -> None:
        self._store = store
        self._id = sink_id
        self.uri = uri

    async def apply(self, txns: Sequence[Txn]) -> None:
        await asyncio.sleep(0)
        if self._store.fail is not None:
            raise self._store.fail
        todo = pending(txns, self._store.checkpoints.get(self._id))
        table = self._store.rows.setdefault(self._id, {})
        for txn in todo:
            for row in txn.rows:
                table[int(row.values["id"])] = str(row.values.get("v", ""))  # type: ignore[arg-type]
            self._store.applied.append(txn.commit_ts)
        if txns:
            self._store.checkpoints[self._id] = max(
                txns[-1].commit_ts, self._store.checkpoints.get(self._id, 0)
            )

    async def checkpoint(self) -> int | None:
        return self._store.checkpoints.get(self._id)

    async def close(self) -> None:
        pass
