"""The drainer's backlog counter: summing over the registered pumps, None when any cannot tell
(registry in memory), and the gRPC question to one pump (a real grpclib server on loopback
serving the pump's ``PumpStatsApi`` over a fake storage)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from grpclib.server import Server

from services.drainer.backlog import BacklogUnknown, PumpBacklog, grpc_asker
from services.pump.api import PumpStatsApi
from services.pump.storage import StorageClosed
from tests.support.net import free_port
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus

CLUSTER = 6801


async def registry_with(*pumps: tuple[str, NodeState]) -> NodeRegistry:
    registry = NodeRegistry(MemoryKv())
    for node_id, state in pumps:
        await registry.update(NodeKind.PUMP, NodeStatus(node_id, f"{node_id}:8250", state))
    return registry


class Answers:
    """An ``AskPump`` answering from a table: addr -> count, or an error to raise, or hang."""

    def __init__(self, table: dict[str, int | BacklogUnknown | None]) -> None:
        self.table = table
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, addr: str, after_ts: int) -> int:
        self.asked.append((addr, after_ts))
        answer = self.table[addr]
        if answer is None:
            await asyncio.Event().wait()  # never answers
            raise AssertionError("unreachable")
        if isinstance(answer, BacklogUnknown):
            raise answer
        return answer


async def test_sums_the_pumps_that_are_not_offline() -> None:
    registry = await registry_with(
        ("p1", NodeState.ONLINE), ("p2", NodeState.PAUSED), ("p3", NodeState.OFFLINE)
    )
    ask = Answers({"p1:8250": 120, "p2:8250": 30})
    count = PumpBacklog(registry, ask)
    assert await count(77) == 150
    assert sorted(ask.asked) == [("p1:8250", 77), ("p2:8250", 77)]  # offline p3 not asked
    assert count.last == {"p1": 120, "p2": 30}
    assert await PumpBacklog(await registry_with(), ask)(77) == 0  # no pumps: nothing held


async def test_unknown_when_any_pump_cannot_tell(caplog: pytest.LogCaptureFixture) -> None:
    registry = await registry_with(("p1", NodeState.ONLINE), ("p2", NodeState.ONLINE))
    ask = Answers({"p1:8250": 120, "p2:8250": BacklogUnknown("UNAVAILABLE: closing")})
    count = PumpBacklog(registry, ask)
    with caplog.at_level("INFO", logger="services.drainer.backlog"):
        assert await count(5) is None  # never the partial 120
    assert "pump p2 at p2:8250 cannot tell: UNAVAILABLE: closing" in caplog.text
    assert count.last == {}
    ask.table["p2:8250"] = 4
    assert await count(5) == 124  # the next measurement is whole again


async def test_unknown_when_a_pump_does_not_answer_in_time() -> None:
    registry = await registry_with(("p1", NodeState.ONLINE), ("p2", NodeState.ONLINE))
    count = PumpBacklog(registry, Answers({"p1:8250": 1, "p2:8250": None}), timeout=0.05)
    assert await count(5) is None


class HeldBacklog:
    """The pump storage's ``backlog`` over a fixed list of commit ts."""

    def __init__(self, commits: list[int]) -> None:
        self.commits = commits
        self.closed = False

    async def backlog(self, after_ts: int) -> tuple[int, int]:
        if self.closed:
            raise StorageClosed("storage is closing")
        return sum(1 for c in self.commits if c > after_ts), max(self.commits)


@asynccontextmanager
async def pump_stats(handlers: list[object]) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = Server(handlers)  # type: ignore[arg-type]
    await server.start(sock=sock)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()
        sock.close()


async def test_grpc_asker_asks_the_pump_stats_service() -> None:
    held = HeldBacklog([100, 200, 300])
    async with pump_stats([PumpStatsApi(CLUSTER, held)]) as addr:
        ask = grpc_asker(CLUSTER, timeout=10)
        assert await ask(addr, 0) == 3
        assert await ask(addr, 150) == 2
        assert await ask(addr, 300) == 0
        with pytest.raises(BacklogUnknown, match="FAILED_PRECONDITION: cluster ID mismatch"):
            await grpc_asker(CLUSTER + 1)(addr, 0)
        held.closed = True
        with pytest.raises(BacklogUnknown, match="UNAVAILABLE"):
            await ask(addr, 0)


async def test_grpc_asker_unknown_without_the_service_or_a_listener() -> None:
    async with pump_stats([]) as addr:  # a pump without PumpStats (a Go pump)
        with pytest.raises(BacklogUnknown):  # grpclib reads the refusal as UNKNOWN
            await grpc_asker(CLUSTER)(addr, 0)
    with pytest.raises(BacklogUnknown, match=r"OSError|ConnectionRefusedError"):
        await grpc_asker(CLUSTER)(f"127.0.0.1:{free_port()}", 0)
    with pytest.raises(BacklogUnknown, match="bad pump address"):
        await grpc_asker(CLUSTER)("no-port", 0)
