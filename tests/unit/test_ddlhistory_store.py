"""The DDL history in a key-value store (here the in-memory one): its keys, malformed values and
store errors. The contract every source keeps, and the allocator and append races, are in
tests/contract/test_ddlhistory_contract.py (on MemoryKv and a real etcd).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import pytest

from tests.support.ddl_jobs import create_db
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
    KvDdlHistory,
    KvIdAllocator,
    MalformedJob,
    job_key,
)


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
