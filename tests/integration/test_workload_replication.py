"""The workload generator plays TiDB against a real MariaDB upstream and two real pumps: every
binlog it wrote, pulled back from the pumps, translated by the drainer's translator and applied
in commit-ts order to a SQLite sink, rebuilds exactly the upstream tables (bank and mixed, DDL
included), and the bank's total never moves."""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
from grpclib.client import Channel

from services.drainer.item import PulledBinlogItem
from services.drainer.puller import to_item
from services.drainer.schema import SchemaTracker
from services.drainer.translate import to_txn
from tests.support.etcd import EtcdProcess
from tests.support.pump import RunningPump, pump_config, running_pump
from tests.unit.test_pumpclient_peer import eventually
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv
from tributary.ddlhistory import KvDdlHistory
from tributary.pumpclient import PumpsClient
from tributary.sinks.sqlite.sink import SqliteSink
from tributary.sql import Statement, sqlite_name
from tributary.tso.client import TsoClient
from tributary.wire.binlog import Pos, PullBinlogReq, PullBinlogResp, PumpStub
from tributary.workload import (
    Bank,
    Catalog,
    Mixed,
    MixedOptions,
    Table,
    columns,
    read_rows,
    run_workload,
    total_balance,
)
from tributary.workload.mixed_tables import SHAPES
from tributary.workload.runner import build_env, run_writers
from tributary.workload.txn import BinlogWriter
from tributary.workload.upstream import Upstream, open_upstream
from tributary.workload.upstream_sqlite import SqliteUpstream

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.etcd

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
    async with await SqliteSink.open(path, cluster_id=c.cluster_id) as sink:
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


async def test_bank_and_mixed_replicate_exactly(
    etcd: EtcdProcess, tmp_path: Path, mariadb: MariaDBDatabase
) -> None:
    bank = Bank(mariadb.name, accounts=30)
    mixed_db = f"{mariadb.name}_mixed"
    mixed = Mixed(mixed_db, MixedOptions(ddl_ratio=0.08, initial_rows=20))
    try:
        async with (
            cluster(etcd, tmp_path) as c,
            open_upstream(mariadb.server.dsn(), writers=6) as up,
        ):
            writer: BinlogWriter = c.client
            bank_stats, mixed_stats = await asyncio.gather(
                run_workload(bank, up, writer, c.tso, c.history, writers=6, duration=4, seed=1),
                run_workload(mixed, up, writer, c.tso, c.history, writers=4, txns=150, seed=2),
            )
            assert await total_balance(up, bank.schema) == bank.expected_total
            for stats in (bank_stats, mixed_stats):
                assert stats.commits > 20 and stats.failures == 0, stats
            assert mixed_stats.ddls > 5  # the database and 4 tables, then some mid-stream
            assert c.client.pending_commits == 0  # every prewrite got its commit or rollback

            upto = max(bank_stats.max_commit_ts, mixed_stats.max_commit_ts)
            items = await pull_all(c, upto)
            expected = bank_stats.commits + bank_stats.ddls + mixed_stats.commits + mixed_stats.ddls
            assert len(items) == expected
            down = tmp_path / "down.db"
            await replicate(c, items, down)
            assert await assert_same_contents(c, up, down, bank.schema) == 30
            assert await assert_same_contents(c, up, down, mixed_db) > 0
            sink = await SqliteUpstream.open(down)
            try:
                assert await total_balance(sink, bank.schema) == bank.expected_total
            finally:
                await sink.close()
    finally:
        mariadb.server.admin(f"DROP DATABASE IF EXISTS `{mixed_db}`")


async def test_every_ddl_kind_mid_stream(
    etcd: EtcdProcess, tmp_path: Path, mariadb: MariaDBDatabase
) -> None:
    """While three writers run the mixed DML, one of each DDL runs on the tables they write."""
    db = mariadb.name
    mixed = Mixed(db, MixedOptions(ddl_ratio=0, initial_rows=20))
    async with cluster(etcd, tmp_path) as c, open_upstream(mariadb.server.dsn(), writers=4) as up:
        env = await build_env(up, c.client, c.tso, c.history)
        await mixed.setup(env)
        stop = asyncio.Event()

        def table(name: str) -> Table:
            found = env.catalog.table(db, name)
            assert found is not None, name
            return found

        async def script() -> None:
            steps: list[Callable[[], Awaitable[object]]] = [
                lambda: env.ddl.add_column(
                    table("sbtest"), columns.int_("extra", not_null=True, default="7")
                ),
                lambda: env.ddl.add_index(table("sbtest"), "idx_pad", ("pad",)),
                lambda: env.ddl.drop_column(table("alltypes"), "tx"),
                lambda: env.ddl.add_column(
                    table("alltypes"), columns.varchar("note", 16, default="'n'")
                ),
                lambda: env.ddl.truncate_table(table("composite")),
                lambda: env.ddl.rename_table(table("nopk"), "nopk2"),
                lambda: env.ddl.create_table(db, dataclasses.replace(SHAPES[0], name="dyn_a")),
                lambda: env.ddl.drop_table(table("dyn_a")),
            ]
            try:
                for ddl in steps:
                    await asyncio.sleep(0.3)
                    await ddl()
                await asyncio.sleep(0.3)
            finally:
                stop.set()

        async with asyncio.TaskGroup() as tg:
            tg.create_task(script(), name="test-ddl-script")
            tg.create_task(run_writers(env, mixed, writers=3, stop=stop, seed=5), name="test-dml")
        assert env.stats.ddls == 5 + 8 and env.stats.failures == 0
        assert table("sbtest").info.column("extra") is not None
        assert table("alltypes").info.column("tx") is None
        assert env.catalog.table(db, "nopk") is None and env.catalog.table(db, "dyn_a") is None
        assert env.stats.commits > 20
        items = await pull_all(c, env.stats.max_commit_ts)
        await replicate(c, items, tmp_path / "down.db")
        assert await assert_same_contents(c, up, tmp_path / "down.db", db) > 0
