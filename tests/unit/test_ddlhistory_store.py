"""The DDL history in a key-value store (here the in-memory one) and its id allocator.

``check_history_contract`` and ``check_allocator_races`` are run against real etcd as well
(tests/integration/test_ddlhistory_etcd.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncGenerator, Sequence

import pytest

from tests.unit.test_drainer_schema import T1, T1_B, alter, create_db, create_table
from tributary.coord.kv import (
    Compare,
    Delete,
    KeyValue,
    Kv,
    KvError,
    Lease,
    Put,
    TxnResult,
    WatchEvent,
)
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import (
    JOBS_PREFIX,
    Counter,
    DdlHistoryError,
    DdlJob,
    JobConflict,
    KvDdlHistory,
    KvIdAllocator,
    MalformedJob,
    TableInfo,
    job_key,
)


def _jobs() -> list[DdlJob]:
    # Job ids and versions deliberately out of step: 9 finished after 10.
    return [
        create_db(1, 1),
        create_table(2, 2, T1),
        alter(10, 3, T1_B),
        alter(9, 4, T1),
    ]


async def check_history_contract(history: KvDdlHistory) -> None:
    jobs = _jobs()
    for job in jobs:
        await history.put_job(job)
    for job in jobs:
        assert await history.get_job(job.id) == job
    assert await history.get_job(77) is None
    assert await history.jobs_since(0) == jobs  # by schema version, not by job id
    assert [j.id for j in await history.jobs_since(2)] == [10, 9]
    assert await history.jobs_since(4) == []
    await history.put_job(jobs[1])  # the same job again: nothing happens
    with pytest.raises(JobConflict, match="job id 2 is taken"):
        await history.put_job(dataclasses.replace(jobs[1], query="DROP TABLE t"))
    assert await history.get_job(2) == jobs[1]


async def check_allocator_races(allocators: Sequence[KvIdAllocator], rounds: int) -> None:
    async def take(a: KvIdAllocator, counter: Counter) -> list[int]:
        return [await a.allocate(counter) for _ in range(rounds)]

    async with asyncio.TaskGroup() as tg:
        tasks = [
            tg.create_task(take(a, c), name=f"alloc-{i}-{c.value}")
            for i, a in enumerate(allocators)
            for c in (Counter.JOB_ID, Counter.TABLE_ID)
        ]
    ids = [t.result() for t in tasks]
    jobs = sorted(x for i, got in enumerate(ids) if i % 2 == 0 for x in got)
    tables = sorted(x for i, got in enumerate(ids) if i % 2 == 1 for x in got)
    want = list(range(1, len(allocators) * rounds + 1))
    assert jobs == want and tables == want  # every value handed out exactly once
    for got in ids:
        assert got == sorted(got)  # and increasing for each caller
    assert await allocators[0].current(Counter.JOB_ID) == len(want)


def _alter_at(job_id: int, info: TableInfo, version: int) -> DdlJob:
    return alter(job_id, version, info)


async def check_append_races(histories: Sequence[KvDdlHistory], rounds: int, base: int = 0) -> None:
    """Writers appending at once get versions ``base+1, base+2, ...``, one job each."""

    async def append(h: KvDdlHistory, writer: int) -> None:
        renamed = dataclasses.replace(T1, name=f"w{writer}")
        for _ in range(rounds):
            job_id = await h.ids.next_job_id()
            await h.append_job(functools.partial(_alter_at, job_id, renamed))

    async with asyncio.TaskGroup() as tg:
        for i, h in enumerate(histories):
            tg.create_task(append(h, i), name=f"append-{i}")
    jobs = await histories[0].jobs_since(base)
    count = len(histories) * rounds
    assert [j.schema_version for j in jobs] == list(range(base + 1, base + count + 1))
    assert len({j.id for j in jobs}) == count
    assert {j.table_info.name for j in jobs if j.table_info} == {
        f"w{i}" for i in range(len(histories))
    }
    assert await histories[-1].ids.current(Counter.SCHEMA_VERSION) == base + count


async def test_contract_in_memory() -> None:
    await check_history_contract(KvDdlHistory(MemoryKv()))


async def test_allocators_never_hand_out_a_value_twice() -> None:
    kv = MemoryKv()
    await check_allocator_races([KvIdAllocator(kv) for _ in range(3)], rounds=15)
    a = KvIdAllocator(kv)
    assert await a.allocate(Counter.SCHEMA_VERSION, 5) == 1
    assert await a.next_schema_version() == 6
    assert await a.next_job_id() == 46 and await a.next_table_id() == 46
    with pytest.raises(ValueError, match="count must be positive"):
        await a.allocate(Counter.JOB_ID, 0)


async def test_appended_jobs_take_consecutive_schema_versions() -> None:
    kv = MemoryKv()
    await check_append_races([KvDdlHistory(kv) for _ in range(3)], rounds=6)
    h = KvDdlHistory(kv)
    with pytest.raises(ValueError, match="job 500 has version 99, not 19"):
        await h.append_job(lambda v: alter(500, 99, T1))
    with pytest.raises(JobConflict, match="job id 1 is already in the history"):
        await h.append_job(lambda v: alter(1, v, T1))
    assert await h.ids.current(Counter.SCHEMA_VERSION) == 18  # nothing was taken


async def test_keys_and_malformed_values() -> None:
    assert job_key(7) == JOBS_PREFIX + b"00000000000000000007"
    assert job_key(12) > job_key(7)
    with pytest.raises(ValueError, match="positive"):
        job_key(0)
    kv = MemoryKv()
    await kv.put(job_key(3), b'{"id": "three"}')
    with pytest.raises(MalformedJob, match="'id' is 'three'"):
        await KvDdlHistory(kv).get_job(3)
    await kv.put(Counter.JOB_ID.key, b"lots")
    with pytest.raises(DdlHistoryError, match="counter job-id holds b'lots'"):
        await KvIdAllocator(kv).next_job_id()


class BrokenKv:
    """Our Kv port with the store gone: every call fails as EtcdKv's do."""

    def __init__(self, retriable: bool) -> None:
        self.retriable = retriable

    def _fail(self) -> KvError:
        return KvError("etcd unreachable", retriable=self.retriable)

    async def get(self, key: bytes) -> KeyValue | None:
        raise self._fail()

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        raise self._fail()

    async def put(self, key: bytes, value: bytes, lease: int = 0) -> int:
        raise self._fail()

    async def delete(self, key: bytes) -> bool:
        raise self._fail()

    async def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Put | Delete],
        failure: Sequence[Put | Delete] = (),
    ) -> TxnResult:
        raise self._fail()

    async def grant_lease(self, ttl_seconds: int) -> Lease:
        raise self._fail()

    def watch_prefix(
        self, prefix: bytes, start_revision: int = 0
    ) -> AsyncGenerator[WatchEvent, None]:
        raise self._fail()


@pytest.mark.parametrize("retriable", [True, False])
async def test_store_errors_become_history_errors(retriable: bool) -> None:
    kv: Kv = BrokenKv(retriable)
    h = KvDdlHistory(kv)
    calls = [
        h.get_job(1),
        h.put_job(create_db(1, 1)),
        h.jobs_since(0),
        h.append_job(lambda v: create_db(1, v)),
        h.ids.next_job_id(),
        h.ids.current(Counter.TABLE_ID),
    ]
    for call in calls:
        with pytest.raises(DdlHistoryError, match="etcd unreachable") as e:
            await call
        assert e.value.retriable is retriable and isinstance(e.value.__cause__, KvError)
