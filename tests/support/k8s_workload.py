"""Rows written through real pumps for the Kubernetes tests: a schema, a table and numbered
rows committed with the pump client and the TSO, and the ids a SQLite downstream holds."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from tests.support.drainer import DB, TABLE, row_value
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.ddlhistory import Action, DdlJob, KvDdlHistory, TableInfo
from tributary.ddlhistory.build import ddl_job
from tributary.pumpclient import PumpsClient
from tributary.tso.client import TsoClient

WriteRows = Callable[[Iterable[int]], Awaitable[None]]


def _job(
    job_id: int, action: Action, version: int, *, table: TableInfo | None, query: str
) -> DdlJob:
    return ddl_job(job_id, action, version, DB, table, query)


@asynccontextmanager
async def table_writer(etcd: str) -> AsyncIterator[WriteRows]:
    """Creates ``merge.t`` through the pumps registered in ``etcd``; yields a function that
    commits one row per id."""
    async with EtcdKv.connect([etcd]) as kv:
        cluster_id = await read_cluster_id(kv)
        assert cluster_id is not None
        history = KvDdlHistory(kv)
        async with (
            TsoClient(kv, cluster_id) as tso,
            PumpsClient(kv, cluster_id, commit_timeout=60.0) as client,
        ):

            async def commit(value: bytes, **ddl: Any) -> int:
                start = await tso.get_ts()
                await client.prewrite(start, value, b"k", **ddl)
                ts = await tso.get_ts()
                await client.commit(start, ts)
                return ts

            async def ddl(job_id: int, action: Action, query: str) -> int:
                table = TABLE if action is Action.CREATE_TABLE else None
                job = await history.append_job(
                    partial(_job, job_id, action, table=table, query=query)
                )
                await commit(b"", ddl_query=query.encode(), ddl_job_id=job_id)
                return job.schema_version

            await ddl(1, Action.CREATE_SCHEMA, "CREATE DATABASE merge")
            version = await ddl(2, Action.CREATE_TABLE, "CREATE TABLE t (id BIGINT)")

            async def write(ids: Iterable[int]) -> None:
                for rid in ids:
                    await commit(row_value(version, rid))

            yield write


def downstream_ids(db: Path) -> set[int]:
    """The ids in ``merge.t`` of a SQLite downstream (empty until the table exists)."""
    if not db.exists():
        return set()
    try:
        with sqlite3.connect(db) as conn:
            return {r[0] for r in conn.execute('SELECT id FROM "merge__t"')}
    except sqlite3.OperationalError:
        return set()
