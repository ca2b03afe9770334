"""The gRPC edge of the TSO maps requests and member errors to statuses."""

from __future__ import annotations

import asyncio

import pytest
from grpclib import GRPCError
from grpclib.const import Status

from tributary.coord.memory import MemoryKv
from tributary.tso.allocator import MAX_COUNT
from tributary.tso.member import MemberTiming, TsoMember
from tributary.tso.service import TsoService
from tributary.wire.binlogext import TsoRequest
from tributary.wire.ts import physical_ms

FAST = MemberTiming(lease_ttl_s=1, update_interval_s=0.01, retry_backoff_s=0.05)


async def test_leader_serves_consecutive_ranges() -> None:
    async with TsoMember(MemoryKv(), 42, "a:1", timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), 5)
        service = TsoService(a)
        r1 = await service.get_timestamps(TsoRequest(cluster_id=42, count=10))
        r2 = await service.get_timestamps(TsoRequest(cluster_id=42, count=1))
    assert r1.count == 10 and r2.count == 1
    assert physical_ms(r1.last - 9) == physical_ms(r1.last)
    assert r2.last > r1.last


async def test_wrong_cluster_id_is_failed_precondition() -> None:
    async with TsoMember(MemoryKv(), 42, "a:1", timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), 5)
        with pytest.raises(GRPCError) as err:
            await TsoService(a).get_timestamps(TsoRequest(cluster_id=41, count=1))
    assert err.value.status is Status.FAILED_PRECONDITION
    assert err.value.message is not None and "41" in err.value.message
    assert "42" in err.value.message


@pytest.mark.parametrize("count", [0, MAX_COUNT + 1])
async def test_bad_count_is_invalid_argument(count: int) -> None:
    async with TsoMember(MemoryKv(), 42, "a:1", timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), 5)
        with pytest.raises(GRPCError) as err:
            await TsoService(a).get_timestamps(TsoRequest(cluster_id=42, count=count))
    assert err.value.status is Status.INVALID_ARGUMENT


async def test_follower_is_unavailable_and_names_the_leader() -> None:
    kv = MemoryKv()
    async with TsoMember(kv, 42, "10.0.0.1:8250", timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), 5)
        async with TsoMember(kv, 42, "10.0.0.2:8250", timing=FAST) as b:
            with pytest.raises(GRPCError) as err:
                await TsoService(b).get_timestamps(TsoRequest(cluster_id=42, count=1))
    assert err.value.status is Status.UNAVAILABLE
    assert err.value.message is not None and "10.0.0.1:8250" in err.value.message
