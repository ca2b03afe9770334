"""``DdlHistory`` in etcd (any ``coord.kv.Kv``), written by our DDL writers.

Layout: ``/tidb-binlog/v1/ddl-history/jobs/<job id, 20 digits>`` -> the job in TiDB's job JSON
(``jobjson``); zero padding makes key order job-id order. Invariants: a job key is written
once (``put_job`` is create-only, an identical re-put is a no-op); ``append_job`` stores a job
together with the schema-version counter in one transaction, so a job with version ``v`` is
visible only once every version below ``v`` was handed out, and no two jobs share a version.
``put_job`` leaves the counters alone: a writer using it takes the version from
``ids.next_schema_version()`` first (``append_job`` is the simpler way).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tributary.coord.kv import Compare, CompareOp, Kv, KvError, Put
from tributary.ddlhistory.allocator import Counter, KvIdAllocator, read_counter
from tributary.ddlhistory.errors import DdlHistoryError, JobConflict
from tributary.ddlhistory.jobjson import dumps_job, loads_job
from tributary.ddlhistory.model import DdlJob

log = logging.getLogger(__name__)

JOBS_PREFIX = b"/tidb-binlog/v1/ddl-history/jobs/"


def job_key(job_id: int) -> bytes:
    if job_id <= 0:
        raise ValueError(f"job id must be positive, got {job_id}")
    return JOBS_PREFIX + f"{job_id:020d}".encode()


def _mapped(e: KvError, doing: str) -> DdlHistoryError:
    return DdlHistoryError(f"DDL history in etcd: {doing}: {e}", retriable=e.retriable)


class KvDdlHistory:
    def __init__(self, kv: Kv, *, attempts: int = 100) -> None:
        self._kv = kv
        self._attempts = attempts
        self.ids = KvIdAllocator(kv, attempts=attempts)

    async def get_job(self, job_id: int) -> DdlJob | None:
        try:
            item = await self._kv.get(job_key(job_id))
        except KvError as e:
            raise _mapped(e, f"reading job {job_id}") from e
        return None if item is None else loads_job(item.value)

    async def put_job(self, job: DdlJob) -> None:
        key = job_key(job.id)
        try:
            absent = Compare(key, CompareOp.VERSION_EQUAL, 0)
            if (await self._kv.txn([absent], [Put(key, dumps_job(job))])).succeeded:
                return
        except KvError as e:
            raise _mapped(e, f"storing job {job.id}") from e
        if await self.get_job(job.id) != job:
            raise JobConflict(f"job id {job.id} is taken by a different job")

    async def append_job(self, make: Callable[[int], DdlJob]) -> DdlJob:
        """Take the next schema version ``v`` and store ``make(v)`` in the same transaction."""
        try:
            for _ in range(self._attempts):
                last, guard = await read_counter(self._kv, Counter.SCHEMA_VERSION)
                job = make(last + 1)
                if job.schema_version != last + 1:
                    raise ValueError(
                        f"job {job.id} has version {job.schema_version}, not {last + 1}"
                    )
                key = job_key(job.id)
                puts = [
                    Put(Counter.SCHEMA_VERSION.key, str(last + 1).encode()),
                    Put(key, dumps_job(job)),
                ]
                absent = Compare(key, CompareOp.VERSION_EQUAL, 0)
                if (await self._kv.txn([guard, absent], puts)).succeeded:
                    return job
                if await self._kv.get(key) is not None:
                    raise JobConflict(f"job id {job.id} is already in the history")
        except KvError as e:
            raise _mapped(e, "appending a job") from e
        raise DdlHistoryError("schema version counter: too much contention", retriable=True)

    async def jobs_since(self, schema_version: int) -> list[DdlJob]:
        try:
            items = await self._kv.get_prefix(JOBS_PREFIX)
        except KvError as e:
            raise _mapped(e, "listing jobs") from e
        jobs = [loads_job(i.value) for i in items]
        newer = [j for j in jobs if j.schema_version > schema_version]
        return sorted(newer, key=lambda j: (j.schema_version, j.id))
