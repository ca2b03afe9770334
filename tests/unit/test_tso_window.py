"""The TSO window in the store: decimal text, and only the sitting leader may save it."""

from __future__ import annotations

import pytest

from tributary.coord.election import Election
from tributary.coord.memory import MemoryKv
from tributary.tso.errors import NotLeader, TsoError
from tributary.tso.keys import LEADER_PREFIX, TIMESTAMP_KEY
from tributary.tso.window import KvWindowStore


async def test_saves_decimal_ms_while_leading_and_refuses_after() -> None:
    kv = MemoryKv()
    async with Election(kv, LEADER_PREFIX, b"a:1") as e:
        await e.campaign()
        store = KvWindowStore(kv, e.guard())
        assert await store.load() is None
        await store.save(1_700_000_003_000)
        raw = await kv.get(TIMESTAMP_KEY)
        assert raw is not None and raw.value == b"1700000003000"
        assert await store.load() == 1_700_000_003_000
        await e.resign()
        with pytest.raises(NotLeader):
            await store.save(1_700_000_009_000)
        assert await store.load() == 1_700_000_003_000


async def test_old_leader_cannot_save_after_new_leader_took_over() -> None:
    kv = MemoryKv()
    async with Election(kv, LEADER_PREFIX, b"a:1") as a, Election(kv, LEADER_PREFIX, b"b:2") as b:
        await a.campaign()
        old = KvWindowStore(kv, a.guard())
        await old.save(100)
        await a.resign()
        await b.campaign()
        new = KvWindowStore(kv, b.guard())
        await new.save(200)
        with pytest.raises(NotLeader):
            await old.save(150)
        assert await new.load() == 200


async def test_garbage_window_is_a_permanent_error() -> None:
    kv = MemoryKv()
    await kv.put(TIMESTAMP_KEY, b"12:30")
    async with Election(kv, LEADER_PREFIX, b"a:1") as e:
        await e.campaign()
        with pytest.raises(TsoError) as err:
            await KvWindowStore(kv, e.guard()).load()
        assert not err.value.retriable
