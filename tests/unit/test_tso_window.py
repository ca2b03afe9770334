"""The TSO window in the store: decimal text, and only the sitting leader may save it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tributary.coord.election import Election
from tributary.coord.kv import Compare, Delete, OutcomeUnknown, Put, TxnResult
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


class _LateAndUnsure(MemoryKv):
    """A store whose next txn applies but answers OutcomeUnknown (its member froze after
    applying it, the resend's compares failed), and which can replay a txn it saw later
    (the frozen member waking up)."""

    def __init__(self) -> None:
        super().__init__()
        self.unsure_next = False
        self.seen: list[tuple[Sequence[Compare], Sequence[Put | Delete]]] = []

    async def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Put | Delete],
        failure: Sequence[Put | Delete] = (),
    ) -> TxnResult:
        result = await super().txn(compare, success, failure)
        self.seen.append((compare, success))
        if self.unsure_next:
            self.unsure_next = False
            raise OutcomeUnknown("applied, but the answer was lost")
        return result

    async def replay(self, index: int) -> bool:
        compare, success = self.seen[index]
        return (await super().txn(compare, success)).succeeded


async def test_a_save_with_an_unknown_outcome_is_settled_by_reading_it_back() -> None:
    kv = _LateAndUnsure()
    async with Election(kv, LEADER_PREFIX, b"a:1") as e:
        await e.campaign()
        store = KvWindowStore(kv, e.guard())
        await store.load()
        kv.unsure_next = True
        await store.save(100)  # applied: the store finds its value there and goes on
        await store.save(200)
        assert await store.load() == 200


async def test_a_late_copy_of_an_old_save_cannot_put_the_window_back() -> None:
    kv = _LateAndUnsure()
    async with Election(kv, LEADER_PREFIX, b"a:1") as e:
        await e.campaign()
        store = KvWindowStore(kv, e.guard())
        await store.load()
        await store.save(100)
        first = len(kv.seen) - 1
        await store.save(200)
        assert not await kv.replay(first)  # the member that held the first save wakes up
        assert await store.load() == 200
