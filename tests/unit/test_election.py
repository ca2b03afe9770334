"""Leader election on the in-memory store: ordering, handover, lease loss, guards."""

from __future__ import annotations

import asyncio

import pytest

from tributary.coord.election import Election, ElectionLost, Leader, current_leader
from tributary.coord.kv import KvError, Put
from tributary.coord.memory import MemoryKv, MemoryLease

PREFIX = b"/test/election/"
WAIT = 5.0  # generous bound for anything that should happen "soon"


class FlakyLease(MemoryLease):
    """A lease whose keepalives fail (retriably) while ``owner.partitioned`` is set."""

    async def refresh(self) -> None:
        owner = self._owner
        assert isinstance(owner, PartitionableKv)
        if owner.partitioned:
            raise KvError("store unreachable", retriable=True)
        await super().refresh()


class PartitionableKv(MemoryKv):
    def __init__(self) -> None:
        super().__init__()
        self.partitioned = False

    async def grant_lease(self, ttl_seconds: int) -> MemoryLease:
        lease = await super().grant_lease(ttl_seconds)
        return FlakyLease(self, lease.id, ttl_seconds)


async def campaign_task(e: Election) -> asyncio.Task[int]:
    task = asyncio.create_task(e.campaign(), name="test-campaign")
    for _ in range(50):  # let it put its key and start waiting
        await asyncio.sleep(0)
    return task


async def test_single_candidate_leads_with_its_key_revision() -> None:
    kv = MemoryKv()
    async with Election(kv, PREFIX, b"a") as e:
        assert await e.leader() is None
        epoch = await e.campaign()
        mine = await kv.get(e.key)
        assert mine is not None and mine.create_revision == epoch == e.epoch
        assert e.is_leader()
        assert await e.leader() == Leader(b"a", epoch)
        assert e.key == PREFIX + f"{mine.lease:x}".encode()
    assert await kv.get_prefix(PREFIX) == []  # exit revoked the lease, key gone
    assert not e.is_leader()


async def test_candidates_follow_key_order_and_wait_only_on_predecessor() -> None:
    kv = MemoryKv()
    async with (
        Election(kv, PREFIX, b"a") as a,
        Election(kv, PREFIX, b"b") as b,
        Election(kv, PREFIX, b"c") as c,
    ):
        epoch_a = await a.campaign()
        tb = await campaign_task(b)
        tc = await campaign_task(c)
        assert not tb.done() and not tc.done()
        assert (await current_leader(kv, PREFIX)) == Leader(b"a", epoch_a)

        kv.expire(_lease_of(b))  # the middle one dies: c now waits on a, still not leader
        with pytest.raises(ElectionLost):
            await asyncio.wait_for(tb, WAIT)
        for _ in range(50):
            await asyncio.sleep(0)
        assert not tc.done()

        await a.resign()
        assert not a.is_leader()
        epoch_c = await asyncio.wait_for(tc, WAIT)
        assert c.is_leader() and epoch_c > epoch_a
        assert (await current_leader(kv, PREFIX)) == Leader(b"c", epoch_c)


async def test_leader_lease_expiry_sets_lost_and_hands_over() -> None:
    kv = MemoryKv()
    async with Election(kv, PREFIX, b"a", ttl=1) as a, Election(kv, PREFIX, b"b", ttl=1) as b:
        await a.campaign()
        tb = await campaign_task(b)
        kv.expire(_lease_of(a))
        await asyncio.wait_for(a.lost.wait(), WAIT)  # keepalive notices within ttl/3
        assert not a.is_leader()
        await asyncio.wait_for(tb, WAIT)
        assert b.is_leader()
        with pytest.raises(ElectionLost):
            await a.campaign()  # a spent election cannot campaign again


async def test_deleted_key_counts_as_lost() -> None:
    kv = MemoryKv()
    async with Election(kv, PREFIX, b"a", ttl=1) as a:
        await a.campaign()
        await kv.delete(a.key)
        await asyncio.wait_for(a.lost.wait(), WAIT)
        assert not a.is_leader()


async def test_guard_holds_only_while_key_is_ours() -> None:
    kv = MemoryKv()
    async with Election(kv, PREFIX, b"a") as a:
        await a.campaign()
        guard = a.guard()
        assert (await kv.txn([guard], [Put(b"/w", b"1")])).succeeded
        await a.resign()
        assert (await kv.txn([guard], [Put(b"/w", b"2")])).succeeded is False
        assert await a.leader() is None
        epoch = await a.campaign()  # the lease is still alive: campaign again
        assert a.guard() != guard and epoch == a.epoch
        assert (await kv.txn([a.guard()], [Put(b"/w", b"3")])).succeeded


async def test_lost_lease_while_campaigning_raises() -> None:
    kv = MemoryKv()
    async with Election(kv, PREFIX, b"a") as a, Election(kv, PREFIX, b"b", ttl=1) as b:
        await a.campaign()
        tb = await campaign_task(b)
        kv.expire(_lease_of(b))
        with pytest.raises(ElectionLost):
            await asyncio.wait_for(tb, WAIT)
        assert b.lost.is_set()


async def test_unreachable_store_ends_leadership_at_local_deadline() -> None:
    kv = PartitionableKv()
    now = [0.0]
    async with Election(kv, PREFIX, b"a", ttl=1, monotonic=lambda: now[0]) as a:
        await a.campaign()
        assert a.is_leader()
        kv.partitioned = True
        now[0] = 0.9  # keepalives fail, but the lease may still be alive
        await asyncio.sleep(0.5)
        assert a.is_leader() and not a.lost.is_set()
        now[0] = 1.5  # past the deadline measured from the last successful keepalive
        assert not a.is_leader()
        await asyncio.wait_for(a.lost.wait(), WAIT)


async def test_exit_while_campaigning_leaves_no_key_or_task() -> None:
    kv = MemoryKv()
    async with Election(kv, PREFIX, b"a") as a:
        await a.campaign()
        async with Election(kv, PREFIX, b"b") as b:
            tb = await campaign_task(b)
            tb.cancel()
            with pytest.raises(asyncio.CancelledError):
                await tb
        keys = [item.key for item in await kv.get_prefix(PREFIX)]
        assert keys == [a.key]


def _lease_of(e: Election) -> int:
    return int(e.key[len(PREFIX) :], 16)
