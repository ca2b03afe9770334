"""One contract for the ``DdlHistory`` port (``tributary.ddlhistory.port``), run against every
source: ``KvDdlHistory`` on MemoryKv and on a real etcd, and ``TidbHttpDdlHistory`` on a
scripted TiDB status server (a real HTTP server on 127.0.0.1; no TiDB runs here).

Where the sources differ, the suite says so: the TiDB source is read-only (``put_job`` raises
``ReadOnlyHistory``; its jobs are the ones TiDB serves), the key-value one stores jobs and
refuses a different job under a taken id. The key-value history's own parts (the id allocator,
``append_job``) are run from several clients at once on every ``Kv``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import pytest

from tests.support.ddl_jobs import T1, T1_B, alter, create_db, create_table
from tests.support.etcd import EtcdProcess
from tests.support.scripted_tidb import ScriptedTidb, serving
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import (
    Counter,
    DdlHistory,
    DdlJob,
    JobConflict,
    KvDdlHistory,
    KvIdAllocator,
    ReadOnlyHistory,
    TableInfo,
    TidbHttpDdlHistory,
    job_key,
    job_to_json,
)

# A history holding the given jobs (stored by its own put_job where it has one).
Opener = Callable[[Sequence[DdlJob]], AbstractAsyncContextManager[DdlHistory]]


@dataclass
class Source:
    name: str
    writable: bool  # put_job stores; otherwise it raises ReadOnlyHistory
    open: Opener


def _jobs() -> list[DdlJob]:
    # Job ids and versions deliberately out of step: 9 finished after 10.
    return [create_db(1, 1), create_table(2, 2, T1), alter(10, 3, T1_B), alter(9, 4, T1)]


@asynccontextmanager
async def _kv_history(kv: Kv, jobs: Sequence[DdlJob]) -> AsyncIterator[DdlHistory]:
    history = KvDdlHistory(kv)
    for job in jobs:
        await history.put_job(job)
    yield history


@asynccontextmanager
async def _memory(jobs: Sequence[DdlJob]) -> AsyncIterator[DdlHistory]:
    async with _kv_history(MemoryKv(), jobs) as history:
        yield history


def _etcd(etcd: EtcdProcess) -> Opener:
    @asynccontextmanager
    async def open_(jobs: Sequence[DdlJob]) -> AsyncIterator[DdlHistory]:
        async with EtcdKv.connect([etcd.endpoint]) as kv, _kv_history(kv, jobs) as history:
            yield history

    return open_


@asynccontextmanager
async def _tidb_http(jobs: Sequence[DdlJob]) -> AsyncIterator[DdlHistory]:
    tidb = ScriptedTidb([job_to_json(j) for j in jobs])
    async with serving(tidb) as url, TidbHttpDdlHistory.connect(url, page_size=2) as history:
        yield history


@pytest.fixture(params=["memory", "etcd", "tidb-http"])
def source(request: pytest.FixtureRequest) -> Source:
    if request.param == "memory":
        return Source("memory", True, _memory)
    if request.param == "etcd":
        return Source("etcd", True, _etcd(request.getfixturevalue("etcd")))
    return Source("tidb-http", False, _tidb_http)


async def test_jobs_by_id_and_by_schema_version(source: Source) -> None:
    jobs = _jobs()
    async with source.open(jobs) as history:
        for job in jobs:
            assert await history.get_job(job.id) == job
        assert await history.get_job(77) is None
        assert await history.jobs_since(0) == jobs  # by schema version, not by job id
        assert [j.id for j in await history.jobs_since(2)] == [10, 9]
        assert await history.jobs_since(4) == []


async def test_an_empty_history(source: Source) -> None:
    async with source.open([]) as history:
        assert await history.get_job(1) is None
        assert await history.jobs_since(0) == []


async def test_putting_jobs(source: Source) -> None:
    jobs = _jobs()
    async with source.open(jobs) as history:
        if not source.writable:
            # A read-only source: TiDB's DDL owner writes its history, never we.
            with pytest.raises(ReadOnlyHistory, match="cannot store job 2"):
                await history.put_job(jobs[1])
            return
        await history.put_job(jobs[1])  # the same job again: nothing happens
        with pytest.raises(JobConflict, match="job id 2 is taken"):
            await history.put_job(dataclasses.replace(jobs[1], query="DROP TABLE t"))
        assert await history.get_job(2) == jobs[1]
        new = alter(11, 5, T1_B)
        await history.put_job(new)
        assert await history.jobs_since(4) == [new]


# -- the key-value history from several clients at once, on every Kv ---------------------------


@pytest.fixture(params=["memory", "etcd"])
async def kvs(request: pytest.FixtureRequest) -> AsyncIterator[list[Kv]]:
    """Three clients of one store."""
    if request.param == "memory":
        kv = MemoryKv()
        yield [kv, kv, kv]
        return
    etcd: EtcdProcess = request.getfixturevalue("etcd")
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(EtcdKv.connect([etcd.endpoint])) for _ in range(3)]


async def test_what_one_client_stored_the_others_read(kvs: list[Kv]) -> None:
    jobs = _jobs()
    for job in jobs:
        await KvDdlHistory(kvs[0]).put_job(job)
    stored = await kvs[1].get(job_key(2))  # TiDB's job JSON under the job's key
    assert stored is not None and b'"SchemaVersion":2' in stored.value
    assert [j.id for j in await KvDdlHistory(kvs[2]).jobs_since(0)] == [1, 2, 10, 9]


async def test_allocators_never_hand_out_a_value_twice(kvs: list[Kv]) -> None:
    rounds = 8
    allocators = [KvIdAllocator(kv) for kv in kvs]

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

    a = allocators[1]
    assert await a.allocate(Counter.SCHEMA_VERSION, 5) == 1
    assert await a.next_schema_version() == 6
    assert await a.next_job_id() == len(want) + 1
    with pytest.raises(ValueError, match="count must be positive"):
        await a.allocate(Counter.JOB_ID, 0)


def _alter_at(job_id: int, info: TableInfo, version: int) -> DdlJob:
    return alter(job_id, version, info)


async def test_appended_jobs_take_consecutive_schema_versions(kvs: list[Kv]) -> None:
    """Writers appending at once get versions 1, 2, ..., one job each."""
    rounds = 5
    histories = [KvDdlHistory(kv) for kv in kvs]

    async def append(h: KvDdlHistory, writer: int) -> None:
        renamed = dataclasses.replace(T1, name=f"w{writer}")
        for _ in range(rounds):
            job_id = await h.ids.next_job_id()
            await h.append_job(functools.partial(_alter_at, job_id, renamed))

    async with asyncio.TaskGroup() as tg:
        for i, h in enumerate(histories):
            tg.create_task(append(h, i), name=f"append-{i}")
    jobs = await histories[0].jobs_since(0)
    count = len(histories) * rounds
    assert [j.schema_version for j in jobs] == list(range(1, count + 1))
    assert len({j.id for j in jobs}) == count
    assert {j.table_info.name for j in jobs if j.table_info} == {
        f"w{i}" for i in range(len(histories))
    }
    assert await histories[-1].ids.current(Counter.SCHEMA_VERSION) == count

    h = histories[1]
    with pytest.raises(ValueError, match=f"job 500 has version 99, not {count + 1}"):
        await h.append_job(lambda v: alter(500, 99, T1))
    with pytest.raises(JobConflict, match=f"job id {jobs[0].id} is already in the history"):
        await h.append_job(lambda v: alter(jobs[0].id, v, T1))
    assert await h.ids.current(Counter.SCHEMA_VERSION) == count  # nothing was taken
