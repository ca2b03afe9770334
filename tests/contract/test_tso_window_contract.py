"""One contract for the TSO's ``WindowStore`` port (``tributary.tso.allocator``), run against
every implementation: ``KvWindowStore`` on MemoryKv and on a real etcd (guarded by a real
election), and ``MemoryWindowStore``, the fake the allocator's unit tests use.

Every store: None before the first save, the last saved window after; once its leader is
deposed a save raises ``NotLeader`` and the window stays where the leader after it put it.
How a leader is deposed differs: the key-value store loses its election guard when another
node wins; the fake is told (``deposed``), standing for that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest

from tests.support.etcd import EtcdProcess
from tests.support.fakes import MemoryWindowStore
from tributary.coord.election import Election
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv
from tributary.coord.memory import MemoryKv
from tributary.tso.allocator import WindowStore
from tributary.tso.errors import NotLeader
from tributary.tso.keys import LEADER_PREFIX
from tributary.tso.window import KvWindowStore


@dataclass
class Leaders:
    first: WindowStore  # the sitting leader's store
    # Depose the first leader; the store of the one that takes over.
    take_over: Callable[[], Awaitable[WindowStore]]


async def _on_kv(kv: Kv, stack: AsyncExitStack) -> Leaders:
    a = await stack.enter_async_context(Election(kv, LEADER_PREFIX, b"a:1"))
    b = await stack.enter_async_context(Election(kv, LEADER_PREFIX, b"b:2"))
    await a.campaign()

    async def take_over() -> WindowStore:
        await a.resign()
        await b.campaign()
        return KvWindowStore(kv, b.guard())

    return Leaders(KvWindowStore(kv, a.guard()), take_over)


@pytest.fixture(params=["kv-memory", "kv-etcd", "fake"])
async def leaders(request: pytest.FixtureRequest) -> AsyncIterator[Leaders]:
    if request.param == "fake":
        store = MemoryWindowStore()

        async def take_over() -> WindowStore:
            store.deposed = True  # the first leader's saves fail from now on
            return _Successor(store)

        yield Leaders(store, take_over)
        return
    async with AsyncExitStack() as stack:
        if request.param == "kv-memory":
            kv: Kv = MemoryKv()
        else:
            etcd: EtcdProcess = request.getfixturevalue("etcd")
            kv = await stack.enter_async_context(EtcdKv.connect([etcd.endpoint]))
        yield await _on_kv(kv, stack)


class _Successor:
    """The next leader's view of the fake: the same window, saved past the deposed flag."""

    def __init__(self, store: MemoryWindowStore) -> None:
        self._store = store

    async def load(self) -> int | None:
        return await self._store.load()

    async def save(self, window_ms: int) -> None:
        self._store.saved = window_ms


async def test_load_returns_the_last_saved_window(leaders: Leaders) -> None:
    store = leaders.first
    assert await store.load() is None
    await store.save(1_700_000_003_000)
    assert await store.load() == 1_700_000_003_000
    await store.save(1_700_000_006_000)
    assert await store.load() == 1_700_000_006_000


async def test_a_deposed_leader_cannot_move_the_window(leaders: Leaders) -> None:
    old = leaders.first
    await old.save(100)
    new = await leaders.take_over()
    assert await new.load() == 100  # the new leader starts from what the old one saved
    await new.save(200)
    with pytest.raises(NotLeader):
        await old.save(150)
    assert await new.load() == 200
    assert await old.load() == 200
