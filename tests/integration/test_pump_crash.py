"""A pump process killed with SIGKILL while writers run loses no acknowledged binlog."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from grpclib.exceptions import GRPCError, StreamTerminatedError

from tests.support.etcd import EtcdProcess
from tests.support.pump import http_json, start_pump_process
from tests.support.stubs import commit, prewrite, pull, pump_stub, rollback, write


async def test_sigkill_mid_stream_loses_no_acknowledged_binlog(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    data_dir = tmp_path / "pump"
    pump = start_pump_process(data_dir, etcd.endpoint)
    status = await asyncio.to_thread(http_json, f"{pump.http}/status")
    node = next(iter(status["status"].values()))
    cluster_id = await _cluster_id(etcd)
    assert node["state"] == "online"

    counter = itertools.count(1000, 10)
    prewrites_sent: set[int] = set()
    prewrites_acked: dict[int, bytes] = {}
    commits_acked: set[int] = set()
    stop = asyncio.Event()

    async def writer() -> None:
        async with pump_stub(pump.addr) as stub:
            while not stop.is_set():
                start = next(counter)
                value = f"txn-{start}".encode() * 20
                prewrites_sent.add(start)
                try:
                    await write(stub, cluster_id, prewrite(start, value))
                    prewrites_acked[start] = value
                    await write(stub, cluster_id, commit(start, start + 1))
                    commits_acked.add(start + 1)
                except (GRPCError, StreamTerminatedError, OSError, TimeoutError):
                    return

    writers = [asyncio.create_task(writer(), name=f"writer-{i}") for i in range(8)]
    while len(commits_acked) < 300:  # noqa: ASYNC110 (polling a counter the writers bump)
        await asyncio.sleep(0.05)
    pump.kill()  # SIGKILL while the writers are still going
    stop.set()
    await asyncio.gather(*writers)
    assert prewrites_acked, "no write was acknowledged before the kill"

    pump = start_pump_process(data_dir, etcd.endpoint, grpc_port=pump.grpc_port)
    try:
        async with pump_stub(pump.addr) as stub:
            # As writers do: a transaction whose prewrite was not acknowledged
            # is rolled back (the pump may have stored it before dying), and a
            # commit not acknowledged is sent again.
            for start in sorted(prewrites_sent - set(prewrites_acked)):
                await write(stub, cluster_id, rollback(start))
            for start in sorted(prewrites_acked):
                if start + 1 not in commits_acked:
                    await write(stub, cluster_id, commit(start, start + 1))
            got = await pull(stub, cluster_id, after=0, count=len(prewrites_acked))
    finally:
        pump.terminate()

    commit_ts = [b.commit_ts for b in got]
    assert commit_ts == sorted(set(commit_ts)), "out of order or duplicated"
    by_commit = {b.commit_ts: b for b in got}
    for start, value in prewrites_acked.items():
        b = by_commit.get(start + 1)
        assert b is not None, f"acknowledged transaction {start} is missing"
        assert b.start_ts == start and b.prewrite_value == value
    assert commits_acked <= set(by_commit)


async def _cluster_id(etcd: EtcdProcess) -> int:
    from tributary.coord.cluster_id import read_cluster_id
    from tributary.coord.etcd import EtcdKv

    async with EtcdKv.connect([etcd.endpoint]) as kv:
        cid = await read_cluster_id(kv)
    assert cid is not None
    return cid
