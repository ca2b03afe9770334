"""Graceful pump scale-down against an in-memory registry and simulated pumps."""

from __future__ import annotations

import pytest

from binlog_operator.manifests import pump_pod
from binlog_operator.scaledown import ScaleDownError, close_pumps, pods_to_close
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus


class ManualClock:
    """Time moves only when the code under test sleeps; each sleep lets the pumps progress."""

    def __init__(self, on_sleep: SimulatedPumps) -> None:
        self.now = 0.0
        self.pumps = on_sleep

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await self.pumps.tick()


class SimulatedPumps:
    """Pumps as the registry sees them: a closed pump turns ``closing`` at once and ``offline``
    after ``drain_ticks`` polls (its drainers catching up), unless ``stuck``."""

    def __init__(self, registry: NodeRegistry, drain_ticks: int = 2) -> None:
        self.registry = registry
        self.drain_ticks = drain_ticks
        self.closing: dict[str, int] = {}
        self.closed: list[str] = []
        self.stuck: set[str] = set()
        self.refuse: set[str] = set()

    async def add(self, pod: str, state: NodeState = NodeState.ONLINE) -> None:
        await self.registry.update(NodeKind.PUMP, NodeStatus(pod, f"{pod}:8250", state))

    async def close(self, pod: str) -> None:
        if pod in self.refuse:
            raise ScaleDownError(f"pump {pod} refused to close: HTTP 409")
        self.closed.append(pod)
        self.closing[pod] = 0
        await self.registry.set_state(NodeKind.PUMP, pod, NodeState.CLOSING)

    async def tick(self) -> None:
        for pod in list(self.closing):
            self.closing[pod] += 1
            if self.closing[pod] >= self.drain_ticks and pod not in self.stuck:
                await self.registry.set_state(NodeKind.PUMP, pod, NodeState.OFFLINE)
                del self.closing[pod]

    async def state(self, pod: str) -> NodeState | None:
        s = await self.registry.get(NodeKind.PUMP, pod)
        return None if s is None else s.state


def pods(n: int) -> list[str]:
    return [pump_pod("c", i) for i in range(n)]


def test_pods_to_close_are_the_highest_ordinals_first() -> None:
    assert pods_to_close(5, 2, lambda i: pump_pod("c", i)) == ["c-pump-4", "c-pump-3", "c-pump-2"]
    assert pods_to_close(2, 2, lambda i: pump_pod("c", i)) == []
    assert pods_to_close(1, 0, lambda i: pump_pod("c", i)) == ["c-pump-0"]


async def test_closes_the_removed_pumps_and_returns_once_they_are_offline() -> None:
    registry = NodeRegistry(MemoryKv())
    sim = SimulatedPumps(registry)
    for p in pods(4):
        await sim.add(p)
    clock = ManualClock(sim)
    await close_pumps(["c-pump-3", "c-pump-2"], sim, registry, within=60, clock=clock)
    assert sim.closed == ["c-pump-3", "c-pump-2"]
    assert [await sim.state(p) for p in pods(4)] == [
        NodeState.ONLINE,
        NodeState.ONLINE,
        NodeState.OFFLINE,
        NodeState.OFFLINE,
    ]
    assert clock.now > 0  # it had to wait for the drain


async def test_offline_closing_and_unregistered_pumps_are_not_closed_again() -> None:
    registry = NodeRegistry(MemoryKv())
    sim = SimulatedPumps(registry)
    await sim.add("c-pump-3", NodeState.OFFLINE)
    await sim.add("c-pump-2", NodeState.CLOSING)
    sim.closing["c-pump-2"] = 0  # it was closed by an earlier attempt and is still draining
    # c-pump-1 never registered (its pod never started): it holds no binlog
    await close_pumps(
        ["c-pump-3", "c-pump-2", "c-pump-1"], sim, registry, within=60, clock=ManualClock(sim)
    )
    assert sim.closed == []
    assert await sim.state("c-pump-2") is NodeState.OFFLINE


async def test_a_paused_pump_stops_the_scale_down_with_its_name() -> None:
    registry = NodeRegistry(MemoryKv())
    sim = SimulatedPumps(registry)
    await sim.add("c-pump-2")
    await sim.add("c-pump-1", NodeState.PAUSED)
    with pytest.raises(ScaleDownError, match="pump c-pump-1 is paused"):
        await close_pumps(
            ["c-pump-2", "c-pump-1"], sim, registry, within=60, clock=ManualClock(sim)
        )


async def test_a_refused_close_is_reported() -> None:
    registry = NodeRegistry(MemoryKv())
    sim = SimulatedPumps(registry)
    await sim.add("c-pump-1")
    sim.refuse.add("c-pump-1")
    with pytest.raises(ScaleDownError, match="refused"):
        await close_pumps(["c-pump-1"], sim, registry, within=60, clock=ManualClock(sim))
    assert await sim.state("c-pump-1") is NodeState.ONLINE


async def test_a_pump_that_never_drains_times_out_naming_it_and_its_state() -> None:
    registry = NodeRegistry(MemoryKv())
    sim = SimulatedPumps(registry)
    for p in pods(3):
        await sim.add(p)
    sim.stuck.add("c-pump-1")
    clock = ManualClock(sim)
    with pytest.raises(ScaleDownError, match=r"not offline after 30 s: c-pump-1 closing$"):
        await close_pumps(["c-pump-2", "c-pump-1"], sim, registry, within=30, poll=1, clock=clock)
    assert 30 <= clock.now <= 31
    assert await sim.state("c-pump-2") is NodeState.OFFLINE
