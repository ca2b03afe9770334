"""PumpsClient against our real pumps (registered in a real etcd by
themselves): P-binlogs spread over the pumps, each C-binlog lands on its
P-binlog's pump, so every pump serves its transactions complete."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel

from tests.support.etcd import EtcdProcess
from tests.support.pump import RunningPump, pump_config, running_pump
from tests.support.waits import eventually
from tributary.coord.etcd import EtcdKv
from tributary.pumpclient import PumpClientError, PumpsClient
from tributary.wire.binlog import Binlog, BinlogType, Pos, PullBinlogReq, PumpStub
from tributary.wire.ts import compose

pytestmark = pytest.mark.etcd

COMMIT = BinlogType(BinlogType.Commit)


async def pull_commits(pump: RunningPump, into: dict[int, tuple[str, Binlog]]) -> None:
    """Record the C-binlogs (with their prewrite values) the pump serves, by
    start_ts, until cancelled."""
    async with Channel("127.0.0.1", pump.started.grpc_port) as channel:
        req = PullBinlogReq(cluster_id=pump.started.cluster_id, start_from=Pos(offset=0))
        async for resp in PumpStub(channel).pull_binlogs(req):
            binlog = Binlog().parse(resp.entity.payload)
            if binlog.tp == COMMIT:
                assert binlog.start_ts not in into, "a transaction served twice"
                into[binlog.start_ts] = (pump.started.node_id, binlog)


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "unary"])
async def test_transactions_arrive_whole_on_real_pumps(
    etcd: EtcdProcess, tmp_path: Path, batch: bool
) -> None:
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint)) as p1,
        running_pump(pump_config(tmp_path / "p2", etcd.endpoint)) as p2,
    ):
        assert p1.started.cluster_id == p2.started.cluster_id
        cluster_id = p1.started.cluster_id
        base = compose(int(time.time() * 1000) + 2000, 0)
        txns = [base + 10 * i for i in range(20)]
        async with PumpsClient(kv, cluster_id, batch=batch) as client:
            await eventually(lambda: len(client.pumps.available) == 2)
            await asyncio.gather(*(client.prewrite(ts, b"row-%d" % ts, b"pk") for ts in txns))
            await asyncio.gather(*(client.commit(ts, ts + 5) for ts in txns))
            assert client.stats.prewrites_ok == client.stats.commits_ok == 20
            assert client.stats.commits_unmatched == 0
            assert (client.stats.batch_rpcs > 0) == batch
            served: dict[int, tuple[str, Binlog]] = {}
            pulls = [asyncio.create_task(pull_commits(p, served)) for p in (p1, p2)]
            try:
                await eventually(lambda: all(ts in served for ts in txns), within=60)
            finally:
                for task in pulls:
                    task.cancel()
                await asyncio.gather(*pulls, return_exceptions=True)
        for ts in txns:
            _, binlog = served[ts]
            assert (binlog.commit_ts, binlog.prewrite_value) == (ts + 5, b"row-%d" % ts)
        # range selection spread the transactions over both pumps
        assert {node for node, _ in served.values()} == {p1.started.node_id, p2.started.node_id}


async def test_wrong_cluster_id_is_refused(etcd: EtcdProcess, tmp_path: Path) -> None:
    fast: dict[str, Any] = {"write_timeout": 0.2, "retry_interval": 0.02}
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_config(tmp_path / "p1", etcd.endpoint)) as p1,
    ):
        async with PumpsClient(kv, p1.started.cluster_id + 1, **fast) as client:
            with pytest.raises(PumpClientError, match="FAILED_PRECONDITION"):
                await client.prewrite(compose(int(time.time() * 1000), 0), b"v")
