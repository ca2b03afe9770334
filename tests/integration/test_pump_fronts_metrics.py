"""The write RPCs' durations on a real pump's ``/metrics``, served by two front processes as by
one: ``binlog_pump_rpc_duration_seconds{method="WriteBinlog"}`` counts every call (the fronts
ship what they observe to the writer over the front link), with the same names and labels."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from grpclib.exceptions import GRPCError
from prometheus_client.parser import text_string_to_metric_families

from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.stubs import commit, prewrite, pump_stub, write
from tributary.coord.cluster_id import ensure_cluster_id
from tributary.coord.etcd import EtcdKv

pytestmark = pytest.mark.timeout(120)

CONNECTIONS = 4  # the kernel spreads connections over the fronts
TXNS = 3  # per connection: a prewrite and a commit each
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def rpc_samples(http: str) -> Samples:
    async with aiohttp.ClientSession() as s, s.get(f"{http}/metrics") as r:
        assert r.status == 200
        text = await r.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("binlog_pump_rpc_duration_seconds")
    }


def count(got: Samples, label: str) -> float:
    return got.get(
        ("binlog_pump_rpc_duration_seconds_count", (("label", label), ("method", "WriteBinlog"))),
        0.0,
    )


async def _writes(addr: str, cluster_id: int, first: int) -> None:
    async with pump_stub(addr) as stub:
        for i in range(TXNS):
            start = first + 10 * i
            await write(stub, cluster_id, prewrite(start))
            await write(stub, cluster_id, commit(start, start + 1))


@pytest.mark.parametrize("fronts", [2, 1])
async def test_write_rpc_durations_are_exported_by_the_writer(
    tmp_path: Path, etcd: EtcdProcess, fronts: int
) -> None:
    cfg = pump_config(tmp_path / "p", etcd.endpoint, front_processes=fronts)
    async with running_pump(cfg) as p:
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            cluster_id = await ensure_cluster_id(kv)
        await asyncio.gather(
            *(_writes(p.addr, cluster_id, 1000 * (c + 1)) for c in range(CONNECTIONS))
        )
        async with pump_stub(p.addr) as stub:
            with pytest.raises(GRPCError):
                await write(stub, cluster_id + 1, prewrite(9000))  # another cluster's: fail

        writes = CONNECTIONS * TXNS * 2
        async with asyncio.timeout(30):
            while True:
                got = await rpc_samples(p.http)
                if count(got, "succ") >= writes and count(got, "fail") >= 1:
                    break
                await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)  # a later shipment adds nothing more
        got = await rpc_samples(p.http)

    assert (count(got, "succ"), count(got, "fail")) == (writes, 1)
    succ = (("label", "succ"), ("method", "WriteBinlog"))
    inf = (("label", "succ"), ("le", "+Inf"), ("method", "WriteBinlog"))
    assert got["binlog_pump_rpc_duration_seconds_bucket", inf] == writes
    assert got["binlog_pump_rpc_duration_seconds_sum", succ] > 0
    buckets = {
        dict(labels)["le"]
        for name, labels in got
        if name == "binlog_pump_rpc_duration_seconds_bucket" and dict(labels)["label"] == "succ"
    }
    assert {"5e-05", "0.0016", "6.5536", "+Inf"} <= buckets and len(buckets) == 19
