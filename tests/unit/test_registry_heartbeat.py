"""Heartbeat over MemoryKv with a hand-driven sleep: beats, forced beats,
failure counting and how a failure reaches the owner."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tributary.coord.kv import KvError
from tributary.coord.memory import MemoryKv
from tributary.registry.heartbeat import Heartbeat, HeartbeatError
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus

PUMP = NodeKind.PUMP
WAIT = 10.0


class Ticks:
    """A sleep that returns only when the test calls ``tick()``."""

    def __init__(self) -> None:
        self.intervals: list[float] = []
        self._go: asyncio.Queue[None] = asyncio.Queue()
        self._changed = asyncio.Condition()

    async def __call__(self, seconds: float) -> None:
        async with self._changed:
            self.intervals.append(seconds)
            self._changed.notify_all()
        await self._go.get()

    def tick(self) -> None:
        self._go.put_nowait(None)

    async def asleep(self, times: int) -> None:
        """Wait until the heartbeat has gone to sleep ``times`` times in total."""
        async with asyncio.timeout(WAIT), self._changed:
            await self._changed.wait_for(lambda: len(self.intervals) >= times)


class FlakyKv(MemoryKv):
    """Puts fail while ``failing`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        if self.failing:
            raise KvError("injected: store unavailable")
        return await super().put(key, value, lease)


class Node:
    """A status source whose max commit ts grows on every call."""

    def __init__(self) -> None:
        self.status = NodeStatus("p1", "h:8250", NodeState.ONLINE)
        self.calls = 0

    def __call__(self) -> NodeStatus:
        self.calls += 1
        self.status = dataclasses.replace(self.status, max_commit_ts=self.calls)
        return self.status


async def test_beats_at_start_and_after_every_interval() -> None:
    reg, ticks, node = NodeRegistry(MemoryKv()), Ticks(), Node()
    async with Heartbeat(reg, PUMP, node, 2.0, sleep=ticks):
        await ticks.asleep(1)
        first = await reg.get(PUMP, "p1")
        ticks.tick()
        await ticks.asleep(2)
        ticks.tick()
        await ticks.asleep(3)
        third = await reg.get(PUMP, "p1")
    assert first is not None and first.max_commit_ts == 1
    assert third is not None and third.max_commit_ts == 3
    assert ticks.intervals == [2.0, 2.0, 2.0]


async def test_status_fn_may_be_async_and_beat_now_writes_at_once() -> None:
    reg, ticks = NodeRegistry(MemoryKv()), Ticks()
    state = NodeState.ONLINE

    async def status() -> NodeStatus:
        await asyncio.sleep(0)
        return NodeStatus("d1", "h:8249", state)

    async with Heartbeat(reg, NodeKind.DRAINER, status, 1.0, sleep=ticks) as hb:
        await ticks.asleep(1)
        state = NodeState.PAUSED
        written = await hb.beat_now()
        assert written.state is NodeState.PAUSED
        got = await reg.get(NodeKind.DRAINER, "d1")
        assert got is not None and got.state is NodeState.PAUSED
        assert len(ticks.intervals) == 1  # no periodic beat was needed
        assert hb.beats == 2


async def test_failures_are_counted_and_a_success_resets_the_streak() -> None:
    kv, ticks, node = FlakyKv(), Ticks(), Node()
    async with Heartbeat(NodeRegistry(kv), PUMP, node, 1.0, max_failures=3, sleep=ticks) as hb:
        await ticks.asleep(1)
        kv.failing = True
        for n in (2, 3):
            ticks.tick()
            await ticks.asleep(n)
        assert (hb.failures, hb.total_failures) == (2, 2)
        kv.failing = False
        ticks.tick()
        await ticks.asleep(4)
        assert (hb.failures, hb.total_failures) == (0, 2)
        kv.failing = True
        for n in (5, 6):
            ticks.tick()
            await ticks.asleep(n)
        assert (hb.failures, hb.total_failures) == (2, 4)  # still below the limit


async def test_run_raises_after_max_consecutive_failures() -> None:
    kv, node = FlakyKv(), Node()
    kv.failing = True

    async def no_wait(seconds: float) -> None:
        await asyncio.sleep(0)

    hb = Heartbeat(NodeRegistry(kv), PUMP, node, 1.0, max_failures=4, sleep=no_wait)
    with pytest.raises(HeartbeatError) as err:
        async with asyncio.timeout(WAIT):
            await hb.run()
    assert node.calls == 4 and hb.failures == 4
    assert isinstance(err.value.__cause__, KvError)


async def test_failure_cancels_the_owner_block_and_comes_out_of_async_with() -> None:
    kv, node = FlakyKv(), Node()
    kv.failing = True
    reached_end = False

    async def no_wait(seconds: float) -> None:
        await asyncio.sleep(0)

    with pytest.raises(HeartbeatError):
        async with Heartbeat(NodeRegistry(kv), PUMP, node, 1.0, max_failures=2, sleep=no_wait):
            await asyncio.sleep(WAIT)  # the service's work; cancelled by the failure
            reached_end = True
    assert not reached_end
    assert node.calls == 2


async def test_the_block_own_error_comes_out_unchanged() -> None:
    reg, ticks, node = NodeRegistry(MemoryKv()), Ticks(), Node()
    with pytest.raises(ValueError, match="service broke"):
        async with Heartbeat(reg, PUMP, node, 1.0, sleep=ticks):
            await ticks.asleep(1)
            raise ValueError("service broke")


async def test_an_outside_cancel_passes_through() -> None:
    reg, ticks, node = NodeRegistry(MemoryKv()), Ticks(), Node()
    started = asyncio.Event()

    async def service() -> None:
        async with Heartbeat(reg, PUMP, node, 1.0, sleep=ticks):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(service(), name="service")
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_rejects_nonsense_settings() -> None:
    reg = NodeRegistry(MemoryKv())
    with pytest.raises(ValueError):
        Heartbeat(reg, PUMP, Node(), 0)
    with pytest.raises(ValueError):
        Heartbeat(reg, PUMP, Node(), 1.0, max_failures=0)
