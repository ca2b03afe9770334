"""The whole binlog pipeline as real processes, for end-to-end tests.

``running_pipeline`` starts etcd and N pumps (``DemoCluster``: real processes that can be
killed with SIGKILL), and opens the clients a workload needs (TSO, pump client, DDL history).
Drainers are started by the test (``cluster.start_drainer``). ``caught_up`` waits until a
downstream's checkpoint row passes a commit ts, so a comparison can follow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncmy
import asyncmy.errors

from services.demo.cluster import DemoCluster, Place, on_loopback
from services.demo.procs import Supervisor
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.ddlhistory import Action, DbInfo, KvDdlHistory
from tributary.ddlhistory.build import ddl_job, table_info
from tributary.pumpclient import PumpsClient
from tributary.sinks.checkpoint import CheckpointRecord
from tributary.tidbcodec import IntDatum, encode_inserted_row
from tributary.tidbcodec import mysqltypes as mt
from tributary.tso.client import TsoClient
from tributary.wire.binlog import MutationType, PrewriteValue, TableMutation


@dataclass
class Pipeline:
    cluster: DemoCluster
    kv: EtcdKv
    cluster_id: int
    tso: TsoClient
    pumps: PumpsClient
    history: KvDdlHistory


@asynccontextmanager
async def running_pipeline(
    root: Path,
    pumps: int = 2,
    etcd_members: int = 1,
    *,
    place: Place = on_loopback,
    pump_args: Sequence[str] = (),
) -> AsyncIterator[Pipeline]:
    """Everything under ``root`` (an existing directory); etcd with ``etcd_members`` members;
    ``place`` and ``pump_args`` as ``DemoCluster`` takes them."""
    supervisor = Supervisor(root)
    try:
        async with DemoCluster(root, supervisor, place=place, pump_args=pump_args) as cluster:
            etcd = await cluster.start_etcd(etcd_members)
            await cluster.start_pumps(pumps)
            async with EtcdKv.connect(etcd.urls) as kv:
                cluster_id = await read_cluster_id(kv)
                assert cluster_id is not None
                async with (
                    TsoClient(kv, cluster_id) as tso,
                    PumpsClient(kv, cluster_id, commit_timeout=60.0) as client,
                ):
                    yield Pipeline(cluster, kv, cluster_id, tso, client, KvDdlHistory(kv))
    finally:
        supervisor.kill_all()


async def mysql_checkpoint(host: str, port: int, user: str, password: str) -> int | None:
    """The commit ts in a MySQL downstream's checkpoint table; None before the first batch."""
    conn = await asyncmy.connect(host=host, port=port, user=user, password=password)
    try:
        async with conn.cursor() as cur:
            await cur.execute("SELECT checkPoint FROM tidb_binlog.checkpoint")
            rows = await cur.fetchall()
    except asyncmy.errors.ProgrammingError:
        return None  # no checkpoint table yet
    finally:
        conn.close()
    return max((CheckpointRecord.from_json(r[0]).commit_ts for r in rows), default=None)


async def caught_up(
    host: str, port: int, user: str, password: str, ts: int, within: float = 90.0
) -> None:
    """Wait until the downstream's checkpoint reaches ``ts``."""
    deadline = time.monotonic() + within
    last: int | None = None
    while time.monotonic() < deadline:
        try:
            last = await mysql_checkpoint(host, port, user, password)
        except (asyncmy.errors.OperationalError, OSError):
            last = None  # the downstream is restarting
        if last is not None and last >= ts:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"downstream checkpoint {last} did not reach {ts} within {within:.0f} s")


# -- a small table written the way TiDB does, for tests that need a few exact rows ----

DB = DbInfo(1, "shop")
ORDERS = table_info(
    10, "orders", [("id", mt.ColumnType(mt.TYPE_LONGLONG, flen=20))], primary_key=["id"]
)


def row(table_id: int, version: int, rid: int) -> bytes:
    inserted = encode_inserted_row([IntDatum(rid)], [(1, IntDatum(rid))])
    mutation = TableMutation(
        table_id=table_id, inserted_rows=[inserted], sequence=[MutationType(MutationType.Insert)]
    )
    return bytes(PrewriteValue(schema_version=version, mutations=[mutation]))


async def commit(pipe: Pipeline, value: bytes, **ddl: object) -> int:
    start = await pipe.tso.get_ts()
    await pipe.pumps.prewrite(start, value, b"k", **ddl)  # type: ignore[arg-type]
    commit_ts = await pipe.tso.get_ts()
    await pipe.pumps.commit(start, commit_ts)
    return commit_ts


async def ddl(pipe: Pipeline, job_id: int, action: Action, table: object, query: str) -> int:
    job = await pipe.history.append_job(
        lambda v: ddl_job(job_id, action, v, DB, table, query)  # type: ignore[arg-type]
    )
    await commit(pipe, b"", ddl_query=query.encode(), ddl_job_id=job_id)
    return job.schema_version
