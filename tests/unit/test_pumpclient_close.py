"""Shutting the pump client down while a batch RPC is in flight, against
scripted pump peers (real grpclib servers on loopback).

grpclib turns the cancellation of a task waiting on a stream into
``StreamTerminatedError`` when the channel is closed in the same step; these
tests hold a batch RPC open so that is exactly what closing the client or
removing a pump meets. Every wait is bounded: a regression shows up as a
``TimeoutError``, not as a hung test run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from tests.support.scripted_pump import ScriptedPump, running_pumps
from tests.support.waits import eventually
from tributary.coord.memory import MemoryKv
from tributary.pumpclient import PumpClientError, PumpsClient
from tributary.pumpclient.batcher import Batcher
from tributary.pumpclient.errors import RpcFailure
from tributary.registry.status import NodeKind, node_key

FAST: dict[str, Any] = {
    "retry_interval": 0.01,
    "probe_interval": 3600,
    "write_timeout": 60,  # the held RPC must not end by its deadline
    "commit_timeout": 5,
    "max_batches_in_flight": 1,  # one batch held, the rest queued behind it
}
BOUND = 20.0  # seconds; closing takes milliseconds when it works


async def register(kv: MemoryKv, *peers: ScriptedPump) -> None:
    for peer in peers:
        await kv.put(node_key(NodeKind.PUMP, peer.node_id), peer.record().to_json())


async def test_close_after_cancelled_writes_with_a_batch_in_flight() -> None:
    """The reported hang: writers cancelled mid-batch, then the client closed."""
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        a.gate = asyncio.Event()  # holds every RPC open
        client = PumpsClient(kv, 7, **FAST)
        async with asyncio.timeout(BOUND):
            async with client:
                writers = [asyncio.create_task(client.prewrite(ts, b"v")) for ts in range(1, 6)]
                await eventually(lambda: a.in_flight == 1)  # one batch, held
                for writer in writers:
                    writer.cancel()
                results = await asyncio.gather(*writers, return_exceptions=True)
                assert all(isinstance(r, asyncio.CancelledError) for r in results)
        assert client.pumps.pumps == {}
        assert a.batch_calls == 1 and a.received == []


async def test_callers_of_an_aborted_batch_get_an_error() -> None:
    async with running_pumps(ScriptedPump("a")) as (a,):
        kv = MemoryKv()
        await register(kv, a)
        a.gate = asyncio.Event()
        client = PumpsClient(kv, 7, **FAST)
        async with asyncio.timeout(BOUND):
            async with client:
                first = asyncio.create_task(client.prewrite(1, b"v"))
                await eventually(lambda: a.in_flight == 1)  # [first] in flight
                queued = asyncio.create_task(client.prewrite(2, b"v"))  # next batch
                await eventually(lambda: len(client.pumps.pumps["a"].batcher._queue) == 1)  # type: ignore[union-attr]
            for writer in (first, queued):
                with pytest.raises(PumpClientError):
                    await writer
        assert client.stats.prewrites_failed == 2
        assert a.batch_calls == 1


async def test_removed_pump_with_a_batch_in_flight_lets_the_client_close() -> None:
    """A pump deleted by the watch while its batch is held: its sender ends at
    once (the caller moves to another pump) and does not block the close."""
    async with running_pumps(ScriptedPump("a"), ScriptedPump("b")) as (a, b):
        kv = MemoryKv()
        await register(kv, a, b)
        a.gate = asyncio.Event()
        client = PumpsClient(kv, 7, **FAST)
        async with asyncio.timeout(BOUND):
            async with client:
                sender = client._batch_tasks[client.pumps.pumps["a"]]
                writer = asyncio.create_task(client.prewrite(1, b"v"))  # range: a first
                await eventually(lambda: a.in_flight == 1)
                await kv.delete(node_key(NodeKind.PUMP, "a"))
                await eventually(lambda: sender.done())
                await writer  # retried on b
        assert [h.start_ts for h in b.binlogs()] == [1]
        assert client.stats.retries == 1


class HeldSend:
    """A ``SendBatch`` that never answers and, like grpclib when its channel is
    closed under it, reports its cancellation as an ordinary error."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, payloads: Sequence[bytes]) -> list[RpcFailure | None]:
        self.calls += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RpcFailure("stream terminated", uncertain=True, reset=True) from None
        raise AssertionError("unreachable")


async def test_stopped_batcher_ends_even_when_send_swallows_the_cancel() -> None:
    send = HeldSend()
    batcher = Batcher(send, max_count=1, max_in_flight=1)
    run = asyncio.create_task(batcher.run(), name="test-batcher")
    callers = [asyncio.create_task(batcher.submit(p)) for p in (b"in flight", b"queued")]
    try:
        async with asyncio.timeout(BOUND):
            await eventually(lambda: send.calls == 1 and len(batcher._queue) == 1)
            batcher.stop()
            run.cancel()
            await asyncio.wait([run])
            in_flight, queued = await asyncio.gather(*callers, return_exceptions=True)
    finally:  # bounded: a sender that ignores cancels is left to the task check
        for task in (run, *callers):
            task.cancel()
        await asyncio.wait([run, *callers], timeout=BOUND)
    assert isinstance(in_flight, RpcFailure) and in_flight.uncertain  # its batch's error
    assert isinstance(queued, RpcFailure) and not queued.uncertain  # never sent
    assert send.calls == 1
    with pytest.raises(RpcFailure, match="closed"):
        await batcher.submit(b"late")


class SlowSend:
    """A ``SendBatch`` that stores everything after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.sent: list[bytes] = []

    async def __call__(self, payloads: Sequence[bytes]) -> list[RpcFailure | None]:
        self.sent.extend(payloads)
        await asyncio.sleep(self.delay)
        return [None] * len(payloads)


async def test_a_write_queued_past_its_timeout_fails_unsent() -> None:
    send = SlowSend(0.2)
    batcher = Batcher(send, queue_timeout=0.05, max_in_flight=1)
    run = asyncio.create_task(batcher.run(), name="test-batcher")
    try:
        async with asyncio.timeout(BOUND):
            first = asyncio.create_task(batcher.submit(b"first"))
            await eventually(lambda: send.sent == [b"first"])
            late = asyncio.create_task(batcher.submit(b"late"))
            assert await first is None
            with pytest.raises(RpcFailure, match="waiting for batch") as failed:
                await late
            assert not failed.value.uncertain  # never sent
            await batcher.submit(b"next")  # a fresh write goes through
    finally:
        batcher.stop()
        await asyncio.wait([run], timeout=BOUND)
    assert send.sent == [b"first", b"next"]


async def test_two_batches_in_flight_and_the_rest_queued() -> None:
    send = SlowSend(0.1)
    batcher = Batcher(send, max_count=4, max_in_flight=2)
    run = asyncio.create_task(batcher.run(), name="test-batcher")
    try:
        async with asyncio.timeout(BOUND):
            callers = [asyncio.create_task(batcher.submit(bytes([i]))) for i in range(10)]
            await eventually(lambda: len(send.sent) == 8)  # two batches of 4 (the cap)
            await asyncio.sleep(0.02)
            assert len(batcher._queue) == 2  # the third waits for a free slot
            assert await asyncio.gather(*callers) == [None] * 10
    finally:
        batcher.stop()
        await asyncio.wait([run], timeout=BOUND)
    assert send.sent == [bytes([i]) for i in range(10)]
