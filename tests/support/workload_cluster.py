"""A writer's cluster for the workload tests (etcd, real pumps, the TSO and pump clients), and what
a drainer does with what it wrote: pull every pump, merge in commit-ts order, translate, apply
to SQLite, compare with the upstream."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from grpclib.client import Channel

from services.drainer.item import PulledBinlogItem
from services.drainer.puller import to_item
from services.drainer.schema import SchemaTracker
from services.drainer.translate import to_txn
from tests.support.etcd import EtcdProcess
from tests.support.pump import RunningPump, pump_config, running_pump
from tests.support.waits import eventually
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv
from tributary.ddlhistory import KvDdlHistory
from tributary.pumpclient import PumpsClient
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink
from tributary.sql import Statement, sqlite_name
from tributary.tso.client import TsoClient
from tributary.wire.binlog import Pos, PullBinlogReq, PullBinlogResp, PumpStub
from tributary.workload import (
    Catalog,
    read_rows,
)
from tributary.workload.upstream import Upstream
from tributary.workload.upstream_sqlite import SqliteUpstream

FAST_PUMP = {"gen_binlog_interval": 0.2}


@dataclass
class Cluster:
    kv: Kv
    pumps: list[RunningPump]
    tso: TsoClient
    client: PumpsClient
    history: KvDdlHistory

    @property
    def cluster_id(self) -> int:
        return self.pumps[0].started.cluster_id


@asynccontextmanager
async def cluster(etcd: EtcdProcess, tmp_path: Path, pumps: int = 2) -> AsyncIterator[Cluster]:
    """etcd + ``pumps`` real pumps + the TSO and pump clients a writer uses."""
    async with AsyncExitStack() as stack:
        kv = await stack.enter_async_context(EtcdKv.connect([etcd.endpoint]))
        running = [
            await stack.enter_async_context(
                running_pump(pump_config(tmp_path / f"pump{i}", etcd.endpoint, **FAST_PUMP))
            )
            for i in range(pumps)
        ]
        cluster_id = running[0].started.cluster_id
        tso = await stack.enter_async_context(TsoClient(kv, cluster_id))
        client = await stack.enter_async_context(PumpsClient(kv, cluster_id))
        await eventually(lambda: len(client.pumps.available) == pumps)
        yield Cluster(kv, running, tso, client, KvDdlHistory(kv))


async def _pull(pump: RunningPump, cluster_id: int, upto: int) -> list[PulledBinlogItem]:
    """Every commit binlog ``pump`` serves, until its stream (fake binlogs too) passes ``upto``."""
    host, _, port = pump.addr.rpartition(":")
    channel = Channel(host, int(port))
    items: list[PulledBinlogItem] = []
    try:
        request = PullBinlogReq(cluster_id=cluster_id, start_from=Pos(offset=0))
        stream = cast(AsyncGenerator[PullBinlogResp, None], PumpStub(channel).pull_binlogs(request))
        async with aclosing(stream) as responses:
            async for resp in responses:
                item = to_item(pump.started.node_id, resp)
                if not item.is_fake:
                    items.append(item)
                if item.commit_ts >= upto:
                    return items
    finally:
        channel.close()
    raise AssertionError(f"pump {pump.addr}: stream ended before commit ts {upto}")


async def pull_all(c: Cluster, upto: int) -> list[PulledBinlogItem]:
    """Every pump's binlogs merged in commit-ts order, a transaction served twice kept once."""
    async with asyncio.timeout(60):
        feeds = await asyncio.gather(*(_pull(p, c.cluster_id, upto) for p in c.pumps))
    merged: list[PulledBinlogItem] = []
    for item in heapq.merge(*feeds, key=lambda i: i.commit_ts):
        if not merged or item.commit_ts > merged[-1].commit_ts:
            merged.append(item)
    return merged


async def replicate(c: Cluster, items: Sequence[PulledBinlogItem], path: Path) -> None:
    """What a drainer does with them: translate in order, apply to a SQLite sink."""
    schema = SchemaTracker()
    txns = [await to_txn(item, schema, c.history) for item in items]
    async with open_sink(f"sqlite://{path}", SinkOptions(cluster_id=c.cluster_id)) as sink:
        for first in range(0, len(txns), 200):
            await sink.apply(txns[first : first + 200])


async def sqlite_tables(path: Path, schema: str) -> set[str]:
    down = await SqliteUpstream.open(path)
    try:
        async with down.session() as s:
            rows = await s.query(Statement("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        await down.close()
    prefix = sqlite_name(schema, "")
    return {str(r[0]) for r in rows if str(r[0]).startswith(prefix)}


async def assert_same_contents(c: Cluster, up: Upstream, path: Path, schema: str) -> int:
    """Every table of ``schema`` upstream equals its downstream copy; the number of rows."""
    catalog = await Catalog.load(c.history)
    tables = catalog.tables(schema)
    assert tables, f"no tables in {schema}"
    assert await sqlite_tables(path, schema) == {sqlite_name(schema, t.name) for t in tables}
    down = await SqliteUpstream.open(path)
    rows = 0
    try:
        for table in tables:
            upstream_rows = await read_rows(up, table)
            assert await read_rows(down, table) == upstream_rows, table.qualified
            rows += len(upstream_rows)
    finally:
        await down.close()
    return rows
