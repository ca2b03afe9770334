"""TSO members on the in-memory store: one leader, handover, deposed leader, overflow."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tributary.coord.memory import MemoryKv
from tributary.tso.allocator import MAX_COUNT
from tributary.tso.clock import ManualClock
from tributary.tso.errors import NotLeader, TsoError
from tributary.tso.keys import LEADER_PREFIX, TIMESTAMP_KEY
from tributary.tso.member import MemberTiming, TsoMember
from tributary.wire.ts import physical_ms

FAST = MemberTiming(lease_ttl_s=1, update_interval_s=0.01, retry_backoff_s=0.05)
WAIT = 5.0


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


async def leader_lease(kv: MemoryKv) -> int:
    keys = await kv.get_prefix(LEADER_PREFIX)
    first = min(keys, key=lambda item: item.create_revision)
    return int(first.key[len(LEADER_PREFIX) :], 16)


async def test_one_member_leads_other_redirects() -> None:
    kv, clock = MemoryKv(), ManualClock(1_000_000)
    async with TsoMember(kv, 7, "a:1", clock=clock, timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), WAIT)
        async with TsoMember(kv, 7, "b:2", clock=clock, timing=FAST) as b:
            await asyncio.sleep(0.05)
            assert a.is_leader and not b.is_leader
            with pytest.raises(NotLeader) as err:
                await b.get_timestamps(1)
            assert err.value.leader == "a:1" and "a:1" in str(err.value)
            assert await b.leader() == "a:1"
            first = await a.get_timestamps(1)
            assert physical_ms(first) == 1_000_000
            saved = await kv.get(TIMESTAMP_KEY)
            assert saved is not None and saved.value == b"1003000"


async def test_handover_continues_strictly_above() -> None:
    kv, clock = MemoryKv(), ManualClock(5_000_000)
    async with (
        TsoMember(kv, 7, "a:1", clock=clock, timing=FAST) as a,
        TsoMember(kv, 7, "b:2", clock=clock, timing=FAST) as b,
    ):
        await asyncio.wait_for(a.wait_leading(), WAIT)
        old = a if a.is_leader else b
        new = b if old is a else a
        got = [await old.get_timestamps(5) for _ in range(3)]
        clock.advance(-60_000)  # the next leader's clock is far behind
        kv.expire(await leader_lease(kv))
        await asyncio.wait_for(new.wait_leading(), WAIT)
        got += [await new.get_timestamps(5) for _ in range(3)]
        assert got == sorted(got) and len(set(got)) == len(got)
        # the fake expires leases instantly; the old leader notices at its next keepalive
        await asyncio.wait_for(until(lambda: not old.is_leader), WAIT)
        with pytest.raises(NotLeader) as err:
            await old.get_timestamps(1)
        assert err.value.leader == new.advertise_addr


async def test_deposed_leader_steps_down_and_window_never_shrinks() -> None:
    kv, clock = MemoryKv(), ManualClock(2_000_000)
    async with TsoMember(kv, 7, "a:1", clock=clock, timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), WAIT)
        key = (await kv.get_prefix(LEADER_PREFIX))[0].key
        await kv.delete(key)  # someone removed our election key
        clock.advance(10_000)  # the next tick must save a window: the guard refuses it
        await asyncio.wait_for(until(lambda: not a.is_leader), WAIT)
        await asyncio.wait_for(a.wait_leading(), WAIT)  # a new term with a new key
        assert (await kv.get_prefix(LEADER_PREFIX))[0].key != key
    latest = await kv.get(TIMESTAMP_KEY)
    assert latest is not None
    windows = []
    async with asyncio.timeout(WAIT):
        async for event in kv.watch_prefix(TIMESTAMP_KEY, start_revision=1):
            windows.append(int(event.value))
            if event.mod_revision == latest.mod_revision:
                break
    assert len(windows) >= 2 and windows == sorted(set(windows))


async def test_exhausted_logicals_wait_for_ticks_with_a_stuck_clock() -> None:
    kv, clock = MemoryKv(), ManualClock(3_000_000)
    timing = MemberTiming(
        lease_ttl_s=1, update_interval_s=0.01, save_interval_ms=4, extend_margin_ms=1
    )
    async with TsoMember(kv, 7, "a:1", clock=clock, timing=timing) as a:
        await asyncio.wait_for(a.wait_leading(), WAIT)
        got = [await a.get_timestamps(MAX_COUNT) for _ in range(12)]  # 3x the 4 ms window
    assert got == sorted(got) and len(set(got)) == len(got)
    assert physical_ms(got[-1]) > 3_000_004


async def test_bad_count_rejected() -> None:
    kv = MemoryKv()
    async with TsoMember(kv, 7, "a:1", timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), WAIT)
        for count in (0, MAX_COUNT + 1):
            with pytest.raises(TsoError) as err:
                await a.get_timestamps(count)
            assert not err.value.retriable


async def test_close_releases_leadership_for_the_next_member() -> None:
    kv = MemoryKv()
    async with TsoMember(kv, 7, "a:1", timing=FAST) as a:
        await asyncio.wait_for(a.wait_leading(), WAIT)
        last = await a.get_timestamps(1)
    assert await kv.get_prefix(LEADER_PREFIX) == []
    async with TsoMember(kv, 7, "a:1", timing=FAST) as again:
        await asyncio.wait_for(again.wait_leading(), WAIT)
        assert await again.get_timestamps(1) > last


async def test_garbage_window_ends_the_member_visibly() -> None:
    kv = MemoryKv()
    await kv.put(TIMESTAMP_KEY, b"not a number")
    async with TsoMember(kv, 7, "a:1", timing=FAST) as a:
        with pytest.raises(TsoError) as err:
            await asyncio.wait_for(a.join(), WAIT)
        assert not err.value.retriable and not a.is_leader
    assert await kv.get_prefix(LEADER_PREFIX) == []
