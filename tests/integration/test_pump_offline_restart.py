"""A pump closed for good stays offline across a restart of its process (the kubelet restarts a
closed pump's container until its StatefulSet shrinks), unless it is started with ``--rejoin``.
Real etcd, real pump."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump, start_pump_process
from tributary.coord.etcd import EtcdKv
from tributary.registry.offline import MARKER
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState

pytestmark = [pytest.mark.etcd]


async def test_a_closed_pump_refuses_to_restart_until_told_to_rejoin(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    data = tmp_path / "p"
    cfg = pump_config(data, etcd.endpoint, node_id="c-pump-1")
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        registry = NodeRegistry(kv)
        async with running_pump(cfg) as p:
            async with aiohttp.ClientSession() as http:
                async with http.put(f"{p.http}/state/c-pump-1/close") as r:
                    assert r.status == 200
            assert await asyncio.wait_for(p.task, 30) is NodeState.OFFLINE
        assert (data / MARKER).exists()

        # a restart (as the kubelet would do) exits non-zero and says how to rejoin
        with pytest.raises(RuntimeError, match="pump exited with 1") as e:
            start_pump_process(data, etcd.endpoint, "--node-id", "c-pump-1")
        assert "was taken offline" in str(e.value) and "--rejoin" in str(e.value)
        status = await registry.get(NodeKind.PUMP, "c-pump-1")
        assert status is not None and status.state is NodeState.OFFLINE  # never came online

        async with running_pump(pump_config(data, etcd.endpoint, node_id="c-pump-1", rejoin=True)):
            status = await registry.get(NodeKind.PUMP, "c-pump-1")
            assert status is not None and status.state is NodeState.ONLINE
        assert not (data / MARKER).exists()
