"""The pump client against our pump's own write edge (``services.pump.api`` over a real
``Intake``, served by grpclib on loopback): a pump that cannot take prewrites now (cut from
etcd, not online) says so as structured detail, and the client moves the prewrite on at once;
a transient refusal keeps the retry policy."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from grpclib.server import Server

from services.pump.api import PumpApi, PumpBatchApi
from services.pump.intake import Intake
from services.pump.pullwire import PumpCodec
from services.pump.state import PumpState
from services.pump.storage import PulledBinlog, StorageError, WriteItem
from tributary.coord.memory import MemoryKv
from tributary.pumpclient import PumpClientError, PumpsClient
from tributary.registry.status import NodeKind, NodeState, NodeStatus, node_key
from tributary.wire.binlog import BinlogType
from tributary.wire.peek import BinlogHeader

P, C = BinlogType(BinlogType.Prewrite), BinlogType(BinlogType.Commit)
FAST: dict[str, Any] = {"retry_interval": 0.01, "probe_interval": 3600, "commit_timeout": 5}


class EdgePump:
    """A pump's write edge: PumpApi and PumpBatchApi over an Intake storing in memory."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.registered = True
        self.failing = 0  # the next N storage writes fail (transient)
        self.items: list[WriteItem] = []
        self.state = PumpState(NodeState.ONLINE)
        self.port = 0

    def writable_for(self, header: BinlogHeader) -> bool:
        return True

    async def write(self, items: Sequence[WriteItem]) -> None:
        if self.failing:
            self.failing -= 1
            raise StorageError("injected: transient storage failure")
        self.items.extend(items)

    async def pull_batches(self, after_ts: int) -> AsyncIterator[list[PulledBinlog]]:
        return
        yield

    def seen(self) -> list[tuple[int, int]]:
        return [(int(i.header.tp), i.header.start_ts) for i in self.items]

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        intake = Intake(self, self.state, 1 << 20, registered=lambda: self.registered)
        server = Server([PumpApi(7, intake, self), PumpBatchApi(7, intake)], codec=PumpCodec())  # type: ignore[arg-type]
        await server.start("127.0.0.1", 0)
        self.port = int(server._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        try:
            yield
        finally:
            server.close()
            await server.wait_closed()


@asynccontextmanager
async def client_of(*pumps: EdgePump, **options: Any) -> AsyncIterator[PumpsClient]:
    kv = MemoryKv()
    async with AsyncExitStack() as stack:
        for pump in pumps:
            await stack.enter_async_context(pump.serving())
            status = NodeStatus(pump.node_id, f"127.0.0.1:{pump.port}", NodeState.ONLINE)
            await kv.put(node_key(NodeKind.PUMP, pump.node_id), status.to_json())
        async with PumpsClient(kv, 7, **{**FAST, **options}) as client:
            yield client


@pytest.fixture(params=[True, False], ids=["batch", "unary"])
def batch(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def test_a_pump_cut_from_etcd_moves_the_prewrite_on_at_once(batch: bool) -> None:
    a, b, c = EdgePump("a"), EdgePump("b"), EdgePump("c")
    a.registered = False
    async with client_of(a, b, c, batch=batch, write_timeout=5) as client:
        await client.prewrite(1, b"v")  # range: a first; it refuses, b takes it at once
        await client.commit(1, 2)
        assert client.stats.prewrites_redirected == 1
        assert client.stats.retries == 0  # no pause, no retry of a
        assert client.pending_commits == 0
    assert a.seen() == [] and c.seen() == []
    assert b.seen() == [(P, 1), (C, 1)]  # a is not offered the commit: it stored nothing


async def test_a_pump_not_online_moves_the_prewrite_on_at_once(batch: bool) -> None:
    a, b = EdgePump("a"), EdgePump("b")
    a.state = PumpState(NodeState.PAUSING)
    async with client_of(a, b, batch=batch, write_timeout=5) as client:
        await client.prewrite(1, b"v")
        assert (client.stats.prewrites_redirected, client.stats.retries) == (1, 0)
    assert b.seen() == [(P, 1)]


async def test_every_pump_refusing_pauses_and_fails_as_not_stored(batch: bool) -> None:
    a, b = EdgePump("a"), EdgePump("b")
    a.registered = b.registered = False
    async with client_of(a, b, batch=batch, write_timeout=0.2) as client:
        with pytest.raises(PumpClientError) as failed:
            await client.prewrite(1, b"v")
        assert not failed.value.maybe_stored  # refused before storing: no rollback needed
        assert client.stats.retries > 0  # once all refused, the pause and retry policy apply
        assert client.stats.prewrites_redirected >= 2
        assert client.pending_commits == 0


async def test_a_transient_refusal_keeps_the_retry_policy(batch: bool) -> None:
    a, b = EdgePump("a"), EdgePump("b")
    a.failing = 1
    async with client_of(a, b, batch=batch, write_timeout=5) as client:
        await client.prewrite(1, b"v")  # a's storage fails once: paused, then b
        assert client.stats.prewrites_redirected == 0
        assert client.stats.retries == 1
    assert b.seen() == [(P, 1)]
