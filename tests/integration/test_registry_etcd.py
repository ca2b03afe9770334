"""The registry, heartbeat and cluster ID against a real etcd."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, aclosing
from typing import Any, cast

from tests.support.etcd import EtcdProcess
from tributary.coord.cluster_id import (
    CLUSTER_ID_KEY,
    ensure_cluster_id,
    random_cluster_id,
    read_cluster_id,
)
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import KeyValue, Kv
from tributary.registry.heartbeat import Heartbeat
from tributary.registry.registry import NodeRegistry, RegistryEvent
from tributary.registry.status import NodeKind, NodeState, NodeStatus, node_key

PUMP = NodeKind.PUMP
WAIT = 30.0


async def next_matching(
    events: AsyncIterator[RegistryEvent], node_id: str, want: NodeState | None
) -> RegistryEvent:
    """Skip events until ``node_id`` reaches state ``want`` (None: deleted)."""
    async with asyncio.timeout(WAIT):
        async for event in events:
            state = None if event.status is None else event.status.state
            if event.node_id == node_id and state is want:
                return event
    raise AssertionError("watch ended")


async def test_heartbeats_and_state_changes_reach_a_watcher_on_another_client(
    etcd: EtcdProcess,
) -> None:
    async with (
        EtcdKv.connect([etcd.endpoint]) as pump_kv,
        EtcdKv.connect([etcd.endpoint]) as ctl_kv,
    ):
        pump_reg, ctl_reg = NodeRegistry(pump_kv), NodeRegistry(ctl_kv)
        await ctl_reg.update(PUMP, NodeStatus("p0", "old:8250", NodeState.OFFLINE))
        status = NodeStatus("p1", "127.0.0.1:8250", NodeState.ONLINE)

        def beat() -> NodeStatus:
            nonlocal status
            status = dataclasses.replace(status, max_commit_ts=status.max_commit_ts + 1)
            return status

        async with aclosing(ctl_reg.watch(PUMP)) as events:
            assert await anext(events) == RegistryEvent(
                "p0", NodeStatus("p0", "old:8250", NodeState.OFFLINE)
            )
            async with Heartbeat(pump_reg, PUMP, beat, 0.05) as hb:
                seen: list[int] = []
                while len(seen) < 3:  # several periodic beats arrive, in order
                    event = await next_matching(events, "p1", NodeState.ONLINE)
                    assert event.status is not None
                    seen.append(event.status.max_commit_ts)
                assert seen == sorted(seen) and len(set(seen)) == 3
                status = status.with_state(NodeState.PAUSED)
                await hb.beat_now()
                await next_matching(events, "p1", NodeState.PAUSED)
            # The node is gone; binlogctl repairs its record.
            await ctl_reg.set_state(PUMP, "p1", NodeState.OFFLINE)
            offline = await next_matching(events, "p1", NodeState.OFFLINE)
            assert offline.status is not None
            assert offline.status.max_commit_ts == status.max_commit_ts  # other fields kept
            await ctl_kv.delete(node_key(PUMP, "p0"))
            assert await next_matching(events, "p0", None) == RegistryEvent("p0", None)
        assert await ctl_reg.list(PUMP, include_offline=False) == []
        assert [s.node_id for s in await ctl_reg.list(PUMP)] == ["p1"]


class ReadTogether:
    """A client whose first read returns only once every racer has read: all of
    them then find no ID and propose their own, on separate connections."""

    def __init__(self, kv: EtcdKv, barrier: asyncio.Barrier) -> None:
        self._kv = kv
        self._barrier: asyncio.Barrier | None = barrier

    async def get(self, key: bytes) -> KeyValue | None:
        found = await self._kv.get(key)
        if self._barrier is not None:
            barrier, self._barrier = self._barrier, None
            await barrier.wait()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)


async def test_cluster_id_is_agreed_by_racing_clients(etcd: EtcdProcess) -> None:
    racers = 6
    barrier = asyncio.Barrier(racers)
    proposals: list[int] = []

    def propose() -> int:
        proposals.append(random_cluster_id())
        return proposals[-1]

    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(EtcdKv.connect([etcd.endpoint])) for _ in range(racers)
        ]
        racing = [cast(Kv, ReadTogether(kv, barrier)) for kv in clients]
        ids = await asyncio.gather(*(ensure_cluster_id(kv, propose) for kv in racing))
        assert len(proposals) == racers  # everyone really raced
        assert len(set(ids)) == 1 and ids[0] in proposals
        stored = await clients[0].get(CLUSTER_ID_KEY.encode())
        assert stored is not None and stored.version == 1
    async with EtcdKv.connect([etcd.endpoint]) as later:
        assert await read_cluster_id(later) == ids[0]
        assert await ensure_cluster_id(later) == ids[0]
