"""Joining and leaving: Notify to drainers, pause, and offline after drainers caught up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from grpclib.server import Server

from services.pump.lifecycle import NotifyFailed
from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tests.support.pump import pump_config, running_pump
from tests.support.stubs import commit, prewrite, pump_stub, write
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.wire.binlog import CisternBase, NotifyReq, NotifyResp


class RecordingCistern(CisternBase):
    """A drainer's Notify endpoint that records what the registry said at call time."""

    def __init__(self, registry: NodeRegistry) -> None:
        self.registry = registry
        self.seen: list[list[NodeStatus]] = []

    async def notify(self, notify_req: NotifyReq) -> NotifyResp:
        self.seen.append(await self.registry.list(NodeKind.PUMP))
        return NotifyResp()


@asynccontextmanager
async def drainer_endpoint(registry: NodeRegistry) -> AsyncIterator[tuple[RecordingCistern, int]]:
    cistern = RecordingCistern(registry)
    server = Server([cistern])
    await server.start("127.0.0.1", 0)
    port = server._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield cistern, port
    finally:
        server.close()
        await server.wait_closed()


async def test_joining_pump_notifies_online_drainers_first(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        registry = NodeRegistry(kv)
        async with drainer_endpoint(registry) as (cistern, port):
            await registry.update(
                NodeKind.DRAINER, NodeStatus("d1", f"127.0.0.1:{port}", NodeState.ONLINE)
            )
            cfg = pump_config(tmp_path / "p", etcd.endpoint)
            async with running_pump(cfg) as p:
                # Notify came before the pump reported itself started, and the
                # drainer could already see the pump online in the registry.
                assert len(cistern.seen) == 1
                assert [(s.node_id, s.state) for s in cistern.seen[0]] == [
                    (p.started.node_id, NodeState.ONLINE)
                ]
            # Restarting from "paused" is not a join: no second Notify.
            async with running_pump(cfg):
                assert len(cistern.seen) == 1


async def test_unreachable_online_drainer_fails_the_join(tmp_path: Path, etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        registry = NodeRegistry(kv)
        dead = f"127.0.0.1:{free_port()}"
        await registry.update(NodeKind.DRAINER, NodeStatus("gone", dead, NodeState.ONLINE))
        cfg = pump_config(tmp_path / "p", etcd.endpoint, node_id="pump-x")
        with pytest.raises(NotifyFailed, match=dead):
            async with running_pump(cfg):
                pass
        status = await registry.get(NodeKind.PUMP, "pump-x")
        assert status is not None and status.state is NodeState.OFFLINE


async def test_close_waits_until_drainers_pass_the_pump(tmp_path: Path, etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        registry = NodeRegistry(kv)
        cfg = pump_config(tmp_path / "p", etcd.endpoint, gen_binlog_interval=0.3)
        async with running_pump(cfg) as p:
            cid, node_id = p.started.cluster_id, p.started.node_id
            async with pump_stub(p.addr) as stub:
                await write(stub, cid, prewrite(700, b"x"))
                await write(stub, cid, commit(700, 701))
            # A drainer registered after the pump started, far behind it (an offline
            # one is ignored).
            await registry.update(
                NodeKind.DRAINER, NodeStatus("lagging", "127.0.0.1:1", NodeState.ONLINE)
            )
            await registry.update(
                NodeKind.DRAINER, NodeStatus("old", "127.0.0.1:2", NodeState.OFFLINE)
            )
            async with aiohttp.ClientSession() as http:
                async with http.put(f"{p.http}/state/{node_id}/close") as r:
                    assert r.status == 200
            await asyncio.sleep(2)
            assert not p.task.done(), "pump went offline before the drainer caught up"
            mine = await registry.get(NodeKind.PUMP, node_id)
            assert mine is not None and mine.state is NodeState.CLOSING
            # Prewrites are refused while closing; commits are still taken.
            async with pump_stub(p.addr) as stub:
                from grpclib.exceptions import GRPCError

                with pytest.raises(GRPCError):
                    await write(stub, cid, prewrite(800))
            # The drainer catches up past the pump's max commit ts.
            await registry.update(
                NodeKind.DRAINER,
                NodeStatus("lagging", "127.0.0.1:1", NodeState.ONLINE, max_commit_ts=1 << 62),
            )
            assert await asyncio.wait_for(p.task, 30) is NodeState.OFFLINE
        final = await registry.get(NodeKind.PUMP, node_id)
        assert final is not None and final.state is NodeState.OFFLINE
        assert final.max_commit_ts >= 701
