"""PumpsClient with its pump records in a real etcd and scripted pump peers
(real grpclib servers) on loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.etcd import EtcdProcess, run_etcd
from tests.support.scripted_pump import ScriptedPump, running_pumps
from tests.support.waits import eventually
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import KvError
from tributary.pumpclient import PumpsClient
from tributary.registry.status import NodeKind, NodeState, node_key
from tributary.wire.binlog import BinlogType

pytestmark = pytest.mark.etcd

P, C = BinlogType(BinlogType.Prewrite), BinlogType(BinlogType.Commit)
FAST: dict[str, Any] = {
    "retry_interval": 0.01,
    "probe_interval": 0.05,
    "write_timeout": 5,
    "commit_timeout": 5,
}


async def register(kv: EtcdKv, peer: ScriptedPump, state: NodeState = NodeState.ONLINE) -> None:
    await kv.put(node_key(NodeKind.PUMP, peer.node_id), peer.record(state).to_json())


def seen(peer: ScriptedPump) -> list[tuple[int, int, int]]:
    return [(int(h.tp), h.start_ts, h.commit_ts) for h in peer.binlogs()]


async def test_pumps_from_etcd_live_membership_and_pairing(etcd: EtcdProcess) -> None:
    async with (
        running_pumps(ScriptedPump("a"), ScriptedPump("b"), ScriptedPump("c")) as (a, b, c),
        EtcdKv.connect([etcd.endpoint]) as kv,
    ):
        await register(kv, a)
        await register(kv, b)
        async with PumpsClient(kv, 4242, **FAST) as client:
            assert set(client.pumps.available) == {"a", "b"}
            await client.prewrite(1, b"one")  # a
            await client.prewrite(2, b"two")  # b

            await register(kv, c)  # a pump joins
            await eventually(lambda: "c" in client.pumps.available)
            await register(kv, a, NodeState.PAUSED)  # a pump pauses
            await eventually(lambda: "a" in client.pumps.unavailable)
            for ts in (3, 4):
                await client.prewrite(ts, b"more")  # b, c (range restarts)
            await client.commit(1, 11)  # still to a, although a is paused
            await client.commit(4, 14)
            await kv.delete(node_key(NodeKind.PUMP, "b"))  # a pump's record vanishes
            await eventually(lambda: "b" not in client.pumps.pumps)
            await client.commit(2, 12)  # its prewrite pump is gone: broadcast
            await client.commit(3, 13)
            assert client.stats.commits_unmatched == 2
        assert seen(a) == [(P, 1, 0), (C, 1, 11)]
        assert seen(b) == [(P, 2, 0), (P, 3, 0)]
        assert seen(c) == [(P, 4, 0), (C, 4, 14), (C, 2, 12), (C, 3, 13)]
        assert {r.cluster_id for p in (a, b, c) for r in p.received} == {4242}


async def test_failing_pump_is_probed_back_into_rotation(etcd: EtcdProcess) -> None:
    async with (
        running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b),
        EtcdKv.connect([etcd.endpoint]) as kv,
    ):
        await register(kv, a)
        await register(kv, b)
        a.errmsg = "storage error"
        async with PumpsClient(kv, 1, **FAST) as client:
            ts = 0
            while "a" in client.pumps.available:
                ts += 1
                await client.prewrite(ts, b"v")
            assert client.stats.prewrites_ok == ts  # every write landed on b
            a.errmsg = ""
            await eventually(lambda: "a" in client.pumps.available)  # the probe task
            await client.prewrite(1000, b"v")
            await client.prewrite(1001, b"v")
        assert (P, 1000, 0) in seen(a) or (P, 1001, 0) in seen(a)
        assert a.probes()


async def test_watch_survives_an_etcd_restart(etcd: EtcdProcess) -> None:
    async with (
        running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b),
        EtcdKv.connect([etcd.endpoint]) as kv,
    ):
        await register(kv, a)
        async with PumpsClient(kv, 1, **FAST) as client:
            etcd.kill()
            await asyncio.sleep(0.5)
            with run_etcd(etcd.data_dir, port=etcd.port):
                await _put_until_up(kv, b)
                await eventually(lambda: "b" in client.pumps.available, within=60)
                await client.prewrite(1, b"v")
                await client.prewrite(2, b"v")
        assert len(seen(a)) == len(seen(b)) == 1


async def _put_until_up(kv: EtcdKv, peer: ScriptedPump) -> None:
    async with asyncio.timeout(60):
        while True:
            try:
                await register(kv, peer)
                return
            except KvError:
                await asyncio.sleep(0.2)
