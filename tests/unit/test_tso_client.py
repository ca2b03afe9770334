"""TsoClient against real gRPC servers on loopback, with members on the in-memory store."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
from grpclib.server import Server

from tributary.coord.memory import MemoryKv
from tributary.tso.client import TsoClient
from tributary.tso.errors import TsoError
from tributary.tso.member import MemberTiming, TsoMember
from tributary.tso.service import TsoService
from tributary.wire.binlogext import TsoRequest, TsoResponse

FAST = MemberTiming(lease_ttl_s=1, update_interval_s=0.01, retry_backoff_s=0.05)
CLUSTER = 7


class CountingService(TsoService):
    """Records each request's count and how many requests overlap."""

    def __init__(self, member: TsoMember) -> None:
        super().__init__(member)
        self.counts: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def get_timestamps(self, tso_request: TsoRequest) -> TsoResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)  # leave room for callers to pile up
            reply = await super().get_timestamps(tso_request)
            self.counts.append(tso_request.count)
            return reply
        finally:
            self.in_flight -= 1


@asynccontextmanager
async def node(kv: MemoryKv) -> AsyncIterator[tuple[TsoMember, CountingService]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    member = TsoMember(kv, CLUSTER, f"127.0.0.1:{sock.getsockname()[1]}", timing=FAST)
    service = CountingService(member)
    server = Server([service])
    await server.start(sock=sock)
    try:
        async with member:
            yield member, service
    finally:
        server.close()
        await server.wait_closed()
        sock.close()


async def test_concurrent_callers_are_coalesced_one_rpc_at_a_time() -> None:
    kv = MemoryKv()
    async with node(kv) as (member, service), TsoClient(kv, CLUSTER) as client:
        await asyncio.wait_for(member.wait_leading(), 5)
        got = await asyncio.gather(*(client.get_ts() for _ in range(300)))
        later = await client.get_ts()
    assert len(set(got)) == 300
    assert later > max(got)
    assert sum(service.counts) == 301
    assert len(service.counts) < 300 and max(service.counts) > 1
    assert service.max_in_flight == 1


async def test_sequential_calls_strictly_increase() -> None:
    kv = MemoryKv()
    async with node(kv) as (member, _), TsoClient(kv, CLUSTER) as client:
        await asyncio.wait_for(member.wait_leading(), 5)
        got = [await client.get_ts() for _ in range(50)]
    assert got == sorted(got) and len(set(got)) == 50


async def test_follows_the_leader_when_it_goes_away() -> None:
    kv = MemoryKv()
    async with AsyncExitStack() as first, AsyncExitStack() as second:
        a, _ = await first.enter_async_context(node(kv))
        await asyncio.wait_for(a.wait_leading(), 5)
        b, _ = await second.enter_async_context(node(kv))
        client = await second.enter_async_context(TsoClient(kv, CLUSTER))
        before = [await client.get_ts() for _ in range(5)]
        await first.aclose()  # the leader goes away; b takes over
        await asyncio.wait_for(b.wait_leading(), 5)
        after = [await client.get_ts() for _ in range(5)]
    seq = before + after
    assert seq == sorted(seq) and len(set(seq)) == len(seq)


async def test_no_leader_times_out_retriably() -> None:
    async with TsoClient(MemoryKv(), CLUSTER, timeout=0.3) as client:
        with pytest.raises(TsoError) as err:
            await client.get_ts()
    assert err.value.retriable


async def test_wrong_cluster_id_is_permanent() -> None:
    kv = MemoryKv()
    async with node(kv) as (member, _), TsoClient(kv, CLUSTER + 1) as client:
        await asyncio.wait_for(member.wait_leading(), 5)
        with pytest.raises(TsoError) as err:
            await client.get_ts()
    assert not err.value.retriable
    assert str(CLUSTER) in str(err.value)


async def test_embedded_leader_allocates_in_process() -> None:
    kv = MemoryKv()
    async with TsoMember(kv, CLUSTER, "127.0.0.1:1", timing=FAST) as member:
        await asyncio.wait_for(member.wait_leading(), 5)
        async with TsoClient(kv, CLUSTER, member=member, timeout=2) as client:
            got = [await client.get_ts() for _ in range(10)]  # nothing listens on :1
    assert got == sorted(got) and len(set(got)) == 10


async def test_embedded_follower_asks_the_leader_over_grpc() -> None:
    kv = MemoryKv()
    async with node(kv) as (leader, service):
        await asyncio.wait_for(leader.wait_leading(), 5)
        async with (
            TsoMember(kv, CLUSTER, "127.0.0.1:1", timing=FAST) as follower,
            TsoClient(kv, CLUSTER, member=follower) as client,
        ):
            ts = await client.get_ts()
    assert ts > 0 and service.counts == [1]
