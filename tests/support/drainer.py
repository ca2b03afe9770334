"""A drainer served in the test's event loop against real pumps and etcd, and what its tests write:
transactions inserting rows into one table (``merge.t``) whose DDL is in the history, and a sink
that refuses a repeat or a step back."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from services.drainer.app import Started, serve
from tests.support.pump import RunningPump
from tests.support.stubs import commit, prewrite, pump_stub, write
from tributary.change import Txn
from tributary.config.drainer import DrainerConfig
from tributary.coord.kv import Kv
from tributary.ddlhistory import Action, DbInfo, KvDdlHistory
from tributary.ddlhistory.build import ddl_job, table_info
from tributary.registry.status import NodeState
from tributary.settings import ListenSettings
from tributary.tidbcodec import IntDatum, encode_inserted_row
from tributary.tidbcodec import mysqltypes as mt
from tributary.tso.client import TsoClient
from tributary.wire.binlog import MutationType, PrewriteValue, TableMutation

FAST_PUMP: dict[str, Any] = {"gen_binlog_interval": 0.2}


VERSION = 2  # the schema version of merge.t in a fresh history


DB = DbInfo(1, "merge")


TABLE = table_info(10, "t", [("id", mt.ColumnType(mt.TYPE_LONGLONG, flen=20))], primary_key=["id"])


async def create_merge_table(kv: Kv) -> int:
    """Put ``merge.t`` into the DDL history (the drainer catches up on it from a row's schema
    version); returns that version."""
    history = KvDdlHistory(kv)
    await history.append_job(
        lambda v: ddl_job(1, Action.CREATE_SCHEMA, v, DB, None, "CREATE DATABASE merge")
    )
    job = await history.append_job(
        lambda v: ddl_job(2, Action.CREATE_TABLE, v, DB, TABLE, "CREATE TABLE t (id bigint)")
    )
    return job.schema_version


def row_value(version: int, start_ts: int) -> bytes:
    """A PrewriteValue inserting the row ``id = start_ts`` into ``merge.t``."""
    row = encode_inserted_row([IntDatum(start_ts)], [(1, IntDatum(start_ts))])
    mutation = TableMutation(
        table_id=TABLE.id, inserted_rows=[row], sequence=[MutationType(MutationType.Insert)]
    )
    return bytes(PrewriteValue(schema_version=version, mutations=[mutation]))


class InOrderSink:
    """Keeps the transactions it is given; refuses (and so stops the drainer on) a repeat or a
    step back: no deduplication here, the drainer's checkpoint has to be right. It keeps no
    checkpoint of its own, so a restarted drainer resumes from its savepoint file."""

    def __init__(self) -> None:
        self.txns: list[Txn] = []
        self.safe_mode = False

    async def apply(self, txns: Sequence[Txn]) -> None:
        for t in txns:
            if not t.rows:
                assert t.ddl is None, f"unexpected DDL at {t.commit_ts}"
                continue
            if self.txns and t.commit_ts <= self.txns[-1].commit_ts:
                raise AssertionError(
                    f"commit ts {t.commit_ts} after {self.txns[-1].commit_ts}: repeated or late"
                )
            self.txns.append(t)

    async def checkpoint(self) -> int | None:
        return None

    async def close(self) -> None:
        pass

    def commit_ts(self) -> set[int]:
        return {t.commit_ts for t in self.txns}


def drainer_config(data_dir: Path, etcd_endpoint: str, **overrides: Any) -> DrainerConfig:
    return dataclasses.replace(
        DrainerConfig(),
        listen=ListenSettings("127.0.0.1:0"),
        data_dir=str(data_dir),
        pd_urls=(etcd_endpoint,),
        checkpoint_interval=0.3,
        **overrides,
    )


@dataclasses.dataclass
class RunningDrainer:
    started: Started
    stop: asyncio.Event
    task: asyncio.Task[NodeState]

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.started.http_port}"

    async def get(self, path: str) -> Any:
        async with aiohttp.ClientSession() as s, s.get(f"{self.http}{path}") as r:
            assert r.status == 200, await r.text()
            return await r.json()


@asynccontextmanager
async def running_drainer(
    cfg: DrainerConfig, sink: InOrderSink | None = None
) -> AsyncIterator[RunningDrainer]:
    """Serve a drainer in this event loop (on ``sink``, else its configured downstream); stop
    it on exit and surface its failure."""
    stop = asyncio.Event()
    ready: asyncio.Future[Started] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(cfg, stop, ready.set_result, sink=sink), name=f"test-drainer-{cfg.data_dir}"
    )
    first: set[asyncio.Future[Any]] = {task, ready}
    done, _ = await asyncio.wait(first, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()
        raise RuntimeError("drainer exited before it started")
    if ready not in done:
        task.cancel()
        raise TimeoutError("drainer did not start within 60 s")
    try:
        yield RunningDrainer(ready.result(), stop, task)
    finally:
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 30)
        except TimeoutError:
            task.cancel()
            raise


async def write_direct(pump: RunningPump, tso: TsoClient, n: int) -> dict[int, int]:
    """Commit ``n`` transactions on one pump only (its gRPC API, no pump client)."""
    out = {}
    async with pump_stub(pump.addr) as stub:
        for _ in range(n):
            start = await tso.get_ts()
            value = row_value(VERSION, start)
            await write(stub, pump.started.cluster_id, prewrite(start, value))
            commit_ts = await tso.get_ts()
            await write(stub, pump.started.cluster_id, commit(start, commit_ts))
            out[commit_ts] = start
    return out
