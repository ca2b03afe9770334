"""One contract for ``coord.kv.Kv``, run against a real etcd (EtcdKv) and MemoryKv.

The fake is only worth having if it behaves like etcd: every assertion here
holds for both, so unit tests written against MemoryKv say something true.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass

import pytest

from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import (
    Compare,
    CompareOp,
    Delete,
    Kv,
    KvError,
    Lease,
    Put,
    WatchEvent,
    WatchEventKind,
)
from tributary.coord.memory import MemoryKv

PUT, DELETE = WatchEventKind.PUT, WatchEventKind.DELETE
WAIT = 20.0  # generous bound for anything that should happen "soon"


@dataclass
class Store:
    kv: Kv
    # Make the lease end as its TTL would: MemoryKv's hook, or waiting on real etcd.
    expire: Callable[[Lease, bytes], Awaitable[None]]


async def _wait_key_gone(kv: Kv, key: bytes) -> None:
    async with asyncio.timeout(WAIT):
        while True:
            if await kv.get(key) is None:
                return
            await asyncio.sleep(0.2)


@pytest.fixture(params=["memory", "etcd"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        mem = MemoryKv()

        async def expire(lease: Lease, key: bytes) -> None:
            mem.expire(lease.id)

        yield Store(mem, expire)
    else:
        etcd = request.getfixturevalue("etcd")
        async with EtcdKv.connect([etcd.endpoint]) as kv:

            async def wait_expired(lease: Lease, key: bytes) -> None:
                await _wait_key_gone(kv, key)

            yield Store(kv, wait_expired)


async def current_revision(kv: Kv) -> int:
    return (await kv.txn((), ())).revision


async def _next(events: AsyncIterator[WatchEvent]) -> WatchEvent:
    return await anext(events)


async def collect(events: AsyncIterator[WatchEvent], n: int) -> list[WatchEvent]:
    got: list[WatchEvent] = []
    async with asyncio.timeout(WAIT):
        async for event in events:
            got.append(event)
            if len(got) == n:
                break
    return got


async def test_put_get_delete_track_revisions_and_versions(store: Store) -> None:
    kv = store.kv
    assert await kv.get(b"/k") is None
    r1 = await kv.put(b"/k", b"a")
    r2 = await kv.put(b"/k", b"b")
    assert r2 == r1 + 1
    got = await kv.get(b"/k")
    assert got is not None
    assert (got.value, got.create_revision, got.mod_revision, got.version) == (b"b", r1, r2, 2)
    assert await kv.delete(b"/k") is True
    after_delete = await current_revision(kv)
    assert after_delete == r2 + 1
    assert await kv.delete(b"/k") is False
    assert await current_revision(kv) == after_delete  # deleting nothing writes nothing
    r3 = await kv.put(b"/k", b"c")
    got = await kv.get(b"/k")
    assert got is not None and (got.create_revision, got.version) == (r3, 1)


async def test_get_prefix_returns_only_the_prefix_in_key_order(store: Store) -> None:
    kv = store.kv
    for key in [b"/p/b", b"/q", b"/p/a/x", b"/p", b"/p0", b"/p/a", b"/z\xff", b"/z\xff\x01", b"/{"]:
        await kv.put(key, key + b"!")
    got = await kv.get_prefix(b"/p/")
    assert [item.key for item in got] == [b"/p/a", b"/p/a/x", b"/p/b"]
    assert [item.value for item in got] == [b"/p/a!", b"/p/a/x!", b"/p/b!"]
    assert [item.key for item in await kv.get_prefix(b"/z\xff")] == [b"/z\xff", b"/z\xff\x01"]
    assert await kv.get_prefix(b"/none/") == []


async def test_txn_version_zero_means_absent_and_guards_creation(store: Store) -> None:
    kv = store.kv
    absent = [Compare(b"/id", CompareOp.VERSION_EQUAL, 0)]
    first = await kv.txn(absent, [Put(b"/id", b"1")], [Put(b"/lost", b"1")])
    assert first.succeeded and first.revision == await current_revision(kv)
    second = await kv.txn(absent, [Put(b"/id", b"2")], [Put(b"/lost", b"2")])
    assert not second.succeeded
    assert second.revision == first.revision + 1  # the failure branch wrote /lost
    got = await kv.get(b"/id")
    assert got is not None and got.value == b"1"
    lost = await kv.get(b"/lost")
    assert lost is not None and lost.value == b"2"


async def test_txn_value_and_mod_revision_compares(store: Store) -> None:
    kv = store.kv
    rev = await kv.put(b"/k", b"v1")
    stale = await kv.txn([Compare(b"/k", CompareOp.MOD_REVISION_EQUAL, rev - 1)], [Delete(b"/k")])
    assert not stale.succeeded and stale.revision == rev  # nothing written
    fresh = await kv.txn(
        [
            Compare(b"/k", CompareOp.MOD_REVISION_EQUAL, rev),
            Compare(b"/k", CompareOp.VALUE_EQUAL, b"v1"),
        ],
        [Put(b"/k", b"v2"), Put(b"/other", b"x")],
    )
    assert fresh.succeeded and fresh.revision == rev + 1
    k, other = await kv.get(b"/k"), await kv.get(b"/other")
    assert k is not None and other is not None
    assert k.mod_revision == other.mod_revision == fresh.revision  # one txn, one revision
    assert not (await kv.txn([Compare(b"/k", CompareOp.VALUE_EQUAL, b"v1")], [])).succeeded
    # A value compare on an absent key never holds, not even against b"".
    assert not (await kv.txn([Compare(b"/absent", CompareOp.VALUE_EQUAL, b"")], [])).succeeded
    assert (await kv.txn([Compare(b"/absent", CompareOp.MOD_REVISION_EQUAL, 0)], [])).succeeded
    assert (await kv.txn([Compare(b"/k", CompareOp.VERSION_EQUAL, 2)], [Delete(b"/k")])).succeeded
    assert await kv.get(b"/k") is None


async def test_revoked_lease_takes_its_keys(store: Store) -> None:
    kv = store.kv
    lease = await kv.grant_lease(30)
    await kv.put(b"/l/a", b"1", lease=lease.id)
    await kv.txn([], [Put(b"/l/b", b"2", lease=lease.id)])
    await kv.put(b"/l/c", b"3")
    await lease.refresh()
    got = await kv.get(b"/l/a")
    assert got is not None and got.lease == lease.id
    await lease.revoke()
    assert [item.key for item in await kv.get_prefix(b"/l/")] == [b"/l/c"]
    with pytest.raises(KvError) as err:
        await lease.refresh()
    assert not err.value.retriable
    with pytest.raises(KvError) as err:
        await kv.put(b"/l/d", b"4", lease=lease.id)
    assert not err.value.retriable
    await lease.revoke()  # revoking twice is harmless


async def test_expired_lease_takes_its_keys(store: Store) -> None:
    kv = store.kv
    lease = await kv.grant_lease(1)
    await kv.put(b"/e/a", b"1", lease=lease.id)
    await kv.put(b"/e/b", b"2")
    await store.expire(lease, b"/e/a")
    assert [item.key for item in await kv.get_prefix(b"/e/")] == [b"/e/b"]
    with pytest.raises(KvError) as err:
        await lease.refresh()
    assert not err.value.retriable


async def test_watch_sees_puts_and_deletes_in_revision_order(store: Store) -> None:
    kv = store.kv
    start = await current_revision(kv) + 1
    async with aclosing(kv.watch_prefix(b"/w/", start)) as events:
        r1 = await kv.put(b"/w/a", b"1")
        await kv.put(b"/x", b"outside")
        r2 = await kv.put(b"/w/b", b"2")
        r3 = (await kv.txn([], [Delete(b"/w/a"), Put(b"/w/b", b"3")])).revision
        got = await collect(events, 4)
    assert got == [
        WatchEvent(PUT, b"/w/a", b"1", r1),
        WatchEvent(PUT, b"/w/b", b"2", r2),
        WatchEvent(DELETE, b"/w/a", b"", r3),
        WatchEvent(PUT, b"/w/b", b"3", r3),
    ]


async def test_watch_from_a_start_revision_replays_then_follows(store: Store) -> None:
    kv = store.kv
    await kv.put(b"/w/a", b"1")
    r2 = await kv.put(b"/w/b", b"2")
    r3 = await kv.put(b"/w/a", b"3")
    async with aclosing(kv.watch_prefix(b"/w/", r2)) as events:
        first = await collect(events, 2)
        r4 = await kv.put(b"/w/c", b"4")
        second = await collect(events, 1)
    assert first == [WatchEvent(PUT, b"/w/b", b"2", r2), WatchEvent(PUT, b"/w/a", b"3", r3)]
    assert second == [WatchEvent(PUT, b"/w/c", b"4", r4)]


async def test_watch_from_now_does_not_replay_history(store: Store) -> None:
    kv = store.kv
    await kv.put(b"/w/old", b"1")
    async with aclosing(kv.watch_prefix(b"/w/")) as events:
        first: asyncio.Task[WatchEvent] = asyncio.create_task(_next(events), name="watch-first")
        # The watch starts with the iteration; write until it has seen something.
        async with asyncio.timeout(WAIT):
            while not first.done():
                await kv.put(b"/w/new", b"2")
                await asyncio.wait({first}, timeout=0.05)
        event = first.result()
    assert (event.kind, event.key) == (PUT, b"/w/new")


async def test_cancelled_watch_leaves_no_tasks_and_spares_other_watches(store: Store) -> None:
    kv = store.kv
    start = await current_revision(kv) + 1
    stopped = asyncio.create_task(collect(kv.watch_prefix(b"/w/", start), 2), name="watch-a")
    async with aclosing(kv.watch_prefix(b"/w/", start)) as events:
        r1 = await kv.put(b"/w/a", b"1")
        await asyncio.sleep(0.1)  # let watch-a block on its stream
        stopped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopped
        r2 = await kv.put(b"/w/b", b"2")
        got = await collect(events, 2)
    assert [e.mod_revision for e in got] == [r1, r2]
    current = asyncio.current_task()
    leftover = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert leftover == []


async def test_revoking_a_lease_deletes_its_keys_in_one_revision(store: Store) -> None:
    kv = store.kv
    lease = await kv.grant_lease(30)
    await kv.put(b"/w/a", b"1", lease=lease.id)
    await kv.put(b"/w/b", b"2", lease=lease.id)
    start = await current_revision(kv) + 1
    async with aclosing(kv.watch_prefix(b"/w/", start)) as events:
        await lease.revoke()
        got = await collect(events, 2)
    assert [(e.kind, e.key) for e in got] == [(DELETE, b"/w/a"), (DELETE, b"/w/b")]
    assert got[0].mod_revision == got[1].mod_revision == await current_revision(kv)
