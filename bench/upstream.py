"""The upstream of the pump benchmarks: a TiDB stand-in writing through real pumps.

``open_upstream`` connects to the etcd of a running cluster (``DemoCluster``) and yields an
``Upstream`` with its own TSO client and pump client; ``write_all`` commits a backlog through
it with many concurrent writers, as TiDB's sessions would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.ddlhistory import Action, DbInfo, KvDdlHistory
from tributary.ddlhistory.build import ddl_job
from tributary.pumpclient import PumpsClient
from tributary.tso.client import TsoClient

DB = DbInfo(1, "bench")
WRITERS = 256


class Upstream:
    """Plays TiDB: DDL into the history + DDL binlogs, and transactions through the pump client."""

    def __init__(self, kv: EtcdKv, cluster_id: int, tso: TsoClient, client: PumpsClient) -> None:
        self.history = KvDdlHistory(kv)
        self.cluster_id = cluster_id
        self.tso = tso
        self.client = client
        self.version = 0
        self.last_commit = 0

    async def ddl(self, job_id: int, action: Action, table: Any, query: str) -> None:
        job = await self.history.append_job(lambda v: ddl_job(job_id, action, v, DB, table, query))
        self.version = job.schema_version
        start = await self.tso.get_ts()
        await self.client.prewrite(start, b"", ddl_query=query.encode(), ddl_job_id=job_id)
        commit = await self.tso.get_ts()
        await self.client.commit(start, commit)
        self.last_commit = max(self.last_commit, commit)

    async def txn(self, value: bytes, on_commit_ts: Callable[[int], None] | None = None) -> int:
        start = await self.tso.get_ts()
        await self.client.prewrite(start, value, b"k%d" % start)
        commit = await self.tso.get_ts()
        if on_commit_ts is not None:
            on_commit_ts(commit)
        await self.client.commit(start, commit)
        self.last_commit = max(self.last_commit, commit)
        return commit


@asynccontextmanager
async def open_upstream(etcd_url: str) -> AsyncIterator[Upstream]:
    """An ``Upstream`` writing into the pumps registered in the etcd at ``etcd_url``."""
    async with EtcdKv.connect([etcd_url]) as kv:
        cluster_id = await read_cluster_id(kv)
        assert cluster_id is not None
        async with TsoClient(kv, cluster_id) as tso, PumpsClient(kv, cluster_id) as client:
            yield Upstream(kv, cluster_id, tso, client)


async def write_all(up: Upstream, values: list[bytes]) -> None:
    it = iter(values)

    async def writer() -> None:
        for v in it:
            await up.txn(v)

    async with asyncio.TaskGroup() as tg:
        for i in range(WRITERS):
            tg.create_task(writer(), name=f"bench-writer-{i}")
