"""A real pump process (real etcd) counts what it holds: ``binlogext.PumpStats/Backlog`` over
gRPC, ``GET /backlog`` over HTTP, and the drainer's ``PumpBacklog`` over the registry give
exactly the transactions committed above a ts, with prewrites, rollbacks and the pump's own
fake binlogs not counted; a request for another cluster is refused. And a drainer with
``backlog-threshold`` set measures its backlog from real pumps into ``/status``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from pathlib import Path

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from services.drainer.backlog import PumpBacklog, grpc_asker
from tests.support.drainer import (
    FAST_PUMP,
    VERSION,
    create_merge_table,
    drainer_config,
    row_value,
    running_drainer,
    write_direct,
)
from tests.support.etcd import EtcdProcess
from tests.support.pump import http_json, pump_config, running_pump, start_pump_process
from tests.support.stubs import commit, prewrite, pump_stub, write
from tests.support.waits import eventually, until
from tributary.config.drainer import CatchUpConfig, SyncerConfig
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.pumpclient import PumpsClient
from tributary.registry.registry import NodeRegistry
from tributary.tso.client import TsoClient
from tributary.wire.binlogext import BacklogReq, BacklogResp, PumpStatsStub

pytestmark = pytest.mark.etcd


async def backlog(port: int, cluster_id: int, after_ts: int) -> BacklogResp:
    async with Channel("127.0.0.1", port) as channel:
        req = BacklogReq(cluster_id=cluster_id, after_ts=after_ts)
        return await PumpStatsStub(channel).backlog(req, timeout=10)


async def test_grpc_and_http_count_the_commits_above_a_ts(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    # fake binlogs every 0.2 s: they land between and after the commits and must not count
    pump = await asyncio.to_thread(
        start_pump_process, tmp_path / "p1", etcd.endpoint, "--gen-binlog-interval", "0.2"
    )
    try:
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            cluster_id = await read_cluster_id(kv)
            assert cluster_id is not None
            empty = await backlog(pump.grpc_port, cluster_id, 0)
            assert empty.count == 0
            starts: list[int] = []
            commits: list[int] = []
            async with TsoClient(kv, cluster_id) as tso, PumpsClient(kv, cluster_id) as client:
                await eventually(lambda: len(client.pumps.available) == 1)
                for i in range(8):
                    starts.append(await tso.get_ts())
                    await client.prewrite(starts[-1], b"row-%d" % i, b"pk")
                    if i == 3:
                        await client.rollback(starts[-1])  # rolled back: nothing to pull
                    else:
                        commits.append(await tso.get_ts())
                        await client.commit(starts[-1], commits[-1])
            last = commits[-1]
            for _ in range(300):  # the sorter passes the last commit at once; allow 30 s
                if (await backlog(pump.grpc_port, cluster_id, 0)).max_commit_ts >= last:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # more fake binlogs after the last commit
            for after in (0, starts[0], commits[0], commits[2], commits[3], last, last + 10**9):
                want = sum(1 for c in commits if c > after)
                got = await backlog(pump.grpc_port, cluster_id, after)
                assert got.count == want, after
                assert got.max_commit_ts > last  # a fake binlog came after: it is not counted
                doc = await asyncio.to_thread(http_json, f"{pump.http}/backlog?after={after}")
                assert doc["after"] == after and doc["count"] == want
                assert doc["max_commit_ts"] >= got.max_commit_ts

            # the drainer's counter, over the registry and the same gRPC service
            count = PumpBacklog(NodeRegistry(kv), grpc_asker(cluster_id))
            assert await count(commits[1]) == len(commits) - 2

            with pytest.raises(GRPCError) as refused:
                await backlog(pump.grpc_port, cluster_id + 1, 0)
            assert refused.value.status is Status.FAILED_PRECONDITION
            assert "cluster ID mismatch" in str(refused.value.message)
    finally:
        await asyncio.to_thread(pump.terminate)


async def test_drainer_status_shows_the_backlog_measured_from_the_pumps(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    """p2 holds an open prewrite at s0, so the drainer cannot merge past s0 while p1 holds 5
    transactions committed above it: the backlog is exactly 5 until s0 commits, then 0."""
    downstream = tmp_path / "down.db"
    with contextlib.closing(sqlite3.connect(downstream)) as db:  # the sink applies rows only
        db.execute("CREATE TABLE merge__t (id INTEGER PRIMARY KEY)")
        db.commit()
    syncer = dataclasses.replace(
        SyncerConfig(),
        sink_uri=f"sqlite:///{downstream}",
        catchup=dataclasses.replace(
            CatchUpConfig(), enabled=True, backlog_threshold=10**9, backlog_interval=0.2
        ),
    )
    cfg = drainer_config(tmp_path / "drainer", etcd.endpoint, syncer=syncer)
    async with (
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint, **FAST_PUMP)) as p1,
        running_pump(pump_config(tmp_path / "p2", etcd.endpoint, **FAST_PUMP)) as p2,
        EtcdKv.connect([etcd.endpoint]) as kv,
        TsoClient(kv, p1.started.cluster_id) as tso,
    ):
        version = await create_merge_table(kv)
        assert version == VERSION
        async with running_drainer(cfg) as drainer:

            async def backlog_is(n: int) -> bool:
                status = await drainer.get("/status")
                return bool(status["CatchUp"]["backlog"] == n)

            s0 = await tso.get_ts()
            async with pump_stub(p2.addr) as stub:
                await write(stub, p2.started.cluster_id, prewrite(s0, row_value(VERSION, s0)))
                held = await write_direct(p1, tso, 5)
                await until(lambda: backlog_is(5))
                c0 = await tso.get_ts()
                await write(stub, p2.started.cluster_id, commit(s0, c0))
            await until(lambda: backlog_is(0))
            status = await drainer.get("/status")
            assert status["CatchUp"]["state"] == "idle"  # measured only: the threshold is high
    rows = await asyncio.to_thread(count_rows, downstream)
    assert rows == len(held) + 1


def count_rows(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute("SELECT COUNT(*) FROM merge__t").fetchone()[0])
