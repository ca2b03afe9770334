"""Election and the guarded TSO window against a real etcd."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest

from tests.support.etcd import EtcdProcess
from tributary.coord.election import Election, ElectionLost, Leader, current_leader
from tributary.coord.etcd import EtcdKv
from tributary.tso.errors import NotLeader
from tributary.tso.keys import LEADER_PREFIX
from tributary.tso.window import KvWindowStore

pytestmark = pytest.mark.etcd
WAIT = 30.0


async def test_handover_on_exit_and_on_resign(etcd: EtcdProcess) -> None:
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv1,
        EtcdKv.connect([etcd.endpoint]) as kv2,
        EtcdKv.connect([etcd.endpoint]) as kv3,
        AsyncExitStack() as first,
        Election(kv2, LEADER_PREFIX, b"b") as b,
        Election(kv3, LEADER_PREFIX, b"c") as c,
    ):
        a = await first.enter_async_context(Election(kv1, LEADER_PREFIX, b"a"))
        epoch_a = await a.campaign()
        tb = asyncio.create_task(b.campaign(), name="test-campaign-b")
        await asyncio.sleep(0.2)
        tc = asyncio.create_task(c.campaign(), name="test-campaign-c")
        await asyncio.sleep(0.2)
        assert not tb.done() and not tc.done()
        assert await current_leader(kv3, LEADER_PREFIX) == Leader(b"a", epoch_a)

        await first.aclose()  # a exits and revokes its lease: b is next, c keeps waiting
        epoch_b = await asyncio.wait_for(tb, WAIT)
        assert b.is_leader() and epoch_b > epoch_a and not tc.done()

        await b.resign()
        epoch_c = await asyncio.wait_for(tc, WAIT)
        assert c.is_leader() and epoch_c > epoch_b
        assert await c.leader() == Leader(b"c", epoch_c)


async def test_deposed_leader_cannot_write_the_window(etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        async with Election(kv, LEADER_PREFIX, b"a") as a, Election(kv, LEADER_PREFIX, b"b") as b:
            await a.campaign()
            old = KvWindowStore(kv, a.guard())
            await old.save(1_000)
            await a.resign()
            await b.campaign()
            new = KvWindowStore(kv, b.guard())
            assert await new.load() == 1_000
            await new.save(5_000)
            with pytest.raises(NotLeader):
                await old.save(9_000)
            assert await new.load() == 5_000


async def test_deleted_key_is_noticed(etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv, Election(kv, LEADER_PREFIX, b"a", ttl=2) as a:
        await a.campaign()
        async with EtcdKv.connect([etcd.endpoint]) as other:
            assert await other.delete(a.key)  # an operator removes the leader key
        await asyncio.wait_for(a.lost.wait(), WAIT)
        assert not a.is_leader()
        with pytest.raises(ElectionLost):
            await a.campaign()
