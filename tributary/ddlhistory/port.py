"""The ``DdlHistory`` port: DDL jobs keyed by job id, ordered by schema version.

Two sources implement it: ``KvDdlHistory`` (our writers store jobs in etcd) and
``TidbHttpDdlHistory`` (a real TiDB's status API, read-only).

Contract every source keeps:

* ``get_job(id)`` returns the job stored under ``id`` or None;
* ``jobs_since(v)`` returns every stored job whose schema version is greater than ``v``,
  ordered by (schema version, job id);
* ``put_job`` stores a new job; putting the same job again is a no-op, putting a different
  job under a taken id raises ``JobConflict`` (a read-only source raises ``ReadOnlyHistory``).

Writer contract: a job is stored before any binlog carries its schema version or its id,
and jobs are stored in schema-version order (one DDL at a time, as TiDB's DDL owner does),
so a reader that has seen version ``v`` has seen every job up to ``v``.
"""

from __future__ import annotations

from typing import Protocol

from tributary.ddlhistory.model import DdlJob


class DdlHistory(Protocol):
    async def get_job(self, job_id: int) -> DdlJob | None: ...

    async def put_job(self, job: DdlJob) -> None: ...

    async def jobs_since(self, schema_version: int) -> list[DdlJob]: ...
