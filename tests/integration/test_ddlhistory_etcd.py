"""The DDL history and its id allocator against a real etcd, from several clients at once."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest

from tests.support.etcd import EtcdProcess
from tests.unit.test_ddlhistory_store import (
    check_allocator_races,
    check_append_races,
    check_history_contract,
)
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv
from tributary.ddlhistory import Counter, KvDdlHistory, KvIdAllocator, job_key

pytestmark = pytest.mark.etcd


async def test_contract_and_races_across_clients(etcd: EtcdProcess) -> None:
    async with AsyncExitStack() as stack:
        kvs: list[Kv] = [
            await stack.enter_async_context(EtcdKv.connect([etcd.endpoint])) for _ in range(3)
        ]
        await check_history_contract(KvDdlHistory(kvs[0]))
        # What one client stored, the others read: TiDB's job JSON under the job's key.
        stored = await kvs[1].get(job_key(2))
        assert stored is not None and b'"SchemaVersion":2' in stored.value
        assert [j.id for j in await KvDdlHistory(kvs[2]).jobs_since(0)] == [1, 2, 10, 9]

        await check_allocator_races([KvIdAllocator(kv) for kv in kvs], rounds=8)

        # The contract stored versions 1..4 with put_job, which leaves the version counter
        # alone: move it past them, then appends race from three clients (job ids come from
        # the job-id counter, already past the contract's ids after the allocator races).
        await KvIdAllocator(kvs[0]).allocate(Counter.SCHEMA_VERSION, 4)
        await check_append_races([KvDdlHistory(kv) for kv in kvs], rounds=5, base=4)
        assert len(await KvDdlHistory(kvs[1]).jobs_since(0)) == 4 + 15
