"""NodeRegistry over MemoryKv: records, listing, state repair and the watch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing

import pytest

from tributary.coord.kv import Compare, Delete, KeyValue, Put, TxnResult
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import (
    NodeNotFoundError,
    NodeRegistry,
    RegistryError,
    RegistryEvent,
)
from tributary.registry.status import NodeKind, NodeState, NodeStatus, StatusError, node_key

PUMP, DRAINER = NodeKind.PUMP, NodeKind.DRAINER


def pump(node_id: str, state: NodeState = NodeState.ONLINE, ts: int = 0) -> NodeStatus:
    return NodeStatus(node_id, f"{node_id}:8250", state, max_commit_ts=ts, update_ts=ts)


async def take(events: AsyncIterator[RegistryEvent], n: int) -> list[RegistryEvent]:
    async with asyncio.timeout(10):
        return [await anext(events) for _ in range(n)]


async def test_update_get_and_list_round_trip() -> None:
    reg = NodeRegistry(MemoryKv())
    await reg.update(PUMP, pump("p2", ts=5))
    await reg.update(PUMP, pump("p1", NodeState.OFFLINE))
    await reg.update(DRAINER, pump("d1"))
    await reg.update(PUMP, pump("p2", ts=7))
    assert await reg.get(PUMP, "p2") == pump("p2", ts=7)
    assert await reg.get(PUMP, "d1") is None
    assert await reg.list(PUMP) == [pump("p1", NodeState.OFFLINE), pump("p2", ts=7)]
    assert await reg.list(PUMP, include_offline=False) == [pump("p2", ts=7)]
    assert await reg.list(DRAINER) == [pump("d1")]


async def test_unparseable_records_are_skipped_by_list_but_reported_by_get(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kv = MemoryKv()
    reg = NodeRegistry(kv)
    await reg.update(PUMP, pump("good"))
    await kv.put(node_key(PUMP, "bad"), b"{not json")
    await kv.put(node_key(PUMP, "half"), b'{"nodeId": "half"}')
    with caplog.at_level(logging.WARNING, logger="tributary.registry.registry"):
        assert await reg.list(PUMP) == [pump("good")]
    assert sum("unparseable" in r.getMessage() for r in caplog.records) == 2
    with pytest.raises(StatusError):
        await reg.get(PUMP, "bad")


async def test_set_state_changes_only_the_state() -> None:
    reg = NodeRegistry(MemoryKv())
    await reg.update(PUMP, pump("p1", ts=42))
    written = await reg.set_state(PUMP, "p1", NodeState.PAUSED)
    assert written == pump("p1", NodeState.PAUSED, ts=42)
    assert await reg.get(PUMP, "p1") == written
    with pytest.raises(NodeNotFoundError):
        await reg.set_state(PUMP, "nobody", NodeState.OFFLINE)


class RacingKv(MemoryKv):
    """Before each of the first ``races`` txns, another writer updates the record."""

    def __init__(self, races: int) -> None:
        super().__init__()
        self.races = races
        self.txns = 0

    async def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Put | Delete],
        failure: Sequence[Put | Delete] = (),
    ) -> TxnResult:
        self.txns += 1
        if self.txns <= self.races:
            # A heartbeat's plain put, not a txn: it does not re-enter this hook.
            await NodeRegistry(self).update(PUMP, pump("p1", ts=100 + self.txns))
        return await super().txn(compare, success, failure)


async def test_set_state_retries_when_a_concurrent_write_gets_in_between() -> None:
    kv = RacingKv(races=2)
    reg = NodeRegistry(kv)
    await reg.update(PUMP, pump("p1", ts=1))
    written = await reg.set_state(PUMP, "p1", NodeState.OFFLINE)
    # The third attempt read the racing writer's record and kept its max commit ts.
    assert kv.txns == 3
    assert written == pump("p1", NodeState.OFFLINE, ts=102)
    assert await reg.get(PUMP, "p1") == written


async def test_set_state_gives_up_when_the_record_never_holds_still() -> None:
    reg = NodeRegistry(RacingKv(races=1000))
    await reg.update(PUMP, pump("p1"))
    with pytest.raises(RegistryError):
        await reg.set_state(PUMP, "p1", NodeState.OFFLINE)


async def test_watch_starts_with_a_snapshot_then_follows_changes() -> None:
    kv = MemoryKv()
    reg = NodeRegistry(kv)
    await reg.update(PUMP, pump("p2"))
    await reg.update(PUMP, pump("p1"))
    await kv.put(node_key(PUMP, "junk"), b"junk")
    await reg.update(DRAINER, pump("d1"))
    async with aclosing(reg.watch(PUMP)) as events:
        snapshot = await take(events, 2)
        await reg.update(PUMP, pump("p1", NodeState.PAUSED))
        await kv.delete(node_key(PUMP, "junk"))  # never reported: no event
        await kv.put(node_key(PUMP, "p2"), b"garbage")  # skipped: p2 keeps its status
        await reg.update(DRAINER, pump("d2"))  # other kind: no event
        await kv.delete(node_key(PUMP, "p2"))
        await kv.delete(node_key(PUMP, "never"))
        await reg.update(PUMP, pump("p3"))
        live = await take(events, 3)
    assert snapshot == [RegistryEvent("p1", pump("p1")), RegistryEvent("p2", pump("p2"))]
    assert live == [
        RegistryEvent("p1", pump("p1", NodeState.PAUSED)),
        RegistryEvent("p2", None),
        RegistryEvent("p3", pump("p3")),
    ]


class ChangesDuringSnapshotKv(MemoryKv):
    """Writes land between the watch's revision read and its snapshot read."""

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        await NodeRegistry(self).update(PUMP, pump("p1", ts=9))
        await self.delete(node_key(PUMP, "p2"))
        return await super().get_prefix(prefix)


async def test_watch_does_not_repeat_what_its_snapshot_already_shows() -> None:
    kv = ChangesDuringSnapshotKv()
    reg = NodeRegistry(kv)
    await reg.update(PUMP, pump("p1"))
    await reg.update(PUMP, pump("p2"))
    async with aclosing(reg.watch(PUMP)) as events:
        snapshot = await take(events, 1)
        await reg.update(PUMP, pump("p4"))
        live = await take(events, 1)
    # p1's update and p2's delete happened before the snapshot read: not replayed.
    assert snapshot == [RegistryEvent("p1", pump("p1", ts=9))]
    assert live == [RegistryEvent("p4", pump("p4"))]
