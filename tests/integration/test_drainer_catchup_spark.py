"""End to end: a backlog caught up by a real Spark catch-up job (local mode, a subprocess of a
real drainer process), killed once mid-way, then streaming again; MariaDB on both sides, real
pumps, and the consistency checker has the last word.

The backlog holds bank transfers (updates of existing keys) and an ``items`` table with
inserts, updates and deletes of random keys; the tables are created (DDL) before it, while the
drainer streams, so the backlog is one range.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from services.binlogctl.commands import request_catchup
from services.binlogctl.config import CtlConfig
from tests.support.pipeline import Pipeline, caught_up, mysql_checkpoint, running_pipeline
from tributary.checker import compare
from tributary.workload import open_upstream, run_workload
from tributary.workload.bank import Bank
from tributary.workload.columns import TableSpec, bigint, varchar
from tributary.workload.env import Env
from tributary.workload.txn import TxnContext
from tributary.workload.upstream import Upstream

if TYPE_CHECKING:
    from services.demo.cluster import DrainerNode
    from tests.support.mariadb import MariaDBPair, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(600)]

ITEMS = TableSpec(
    "items",
    (bigint("id", not_null=True), bigint("v", not_null=True), varchar("note", 20)),
    primary_key=("id",),
)
LAG = 4.0  # seconds behind that start a catch-up


class Items:
    """Inserts, updates and deletes (about 3:4:3 once the keys are populated) of random keys."""

    def __init__(self, schema: str = "shop", keys: int = 300) -> None:
        self.schema, self.keys, self._table_id = schema, keys, 0

    async def setup(self, env: Env) -> None:
        if env.catalog.database(self.schema) is None:
            await env.ddl.create_database(self.schema)
        table = env.catalog.table(self.schema, ITEMS.name)
        if table is None:
            table = await env.ddl.create_table(self.schema, ITEMS)
        self._table_id = table.id

    async def step(self, env: Env, rng: random.Random) -> None:
        key, roll, value = rng.randint(1, self.keys), rng.random(), rng.randint(0, 10**6)

        async def body(ctx: TxnContext) -> None:
            table = ctx.table(self._table_id)
            old = await ctx.get(table, {"id": key})
            if old is None:
                await ctx.insert(table, [{"id": key, "v": value, "note": f"n{value}"}])
            elif roll < 0.3:
                await ctx.delete(table, old)
            else:
                await ctx.update(table, old, {**old, "v": value})

        await env.txns.run([self._table_id], body)


def flags(initial: int, tmp_path: Path) -> list[str]:
    return [
        *("--initial-commit-ts", str(initial)),
        "--syncer-catchup-enabled",
        *("--syncer-catchup-lag-threshold", str(LAG), "--syncer-catchup-resume-lag", "1"),
        *("--syncer-catchup-idle", "2", "--syncer-catchup-master", "local[2]"),
        *("--syncer-catchup-partitions", "2", "--syncer-catchup-driver-memory", "512m"),
        *("--syncer-catchup-retries", "2", "--syncer-catchup-retry-delay", "1"),
        *("--syncer-catchup-staging-dir", str(tmp_path / "staging")),
    ]


async def load(pipe: Pipeline, upstream: Upstream, seconds: float | None, seed: int) -> int:
    """Bank transfers and item changes side by side; the highest commit ts written."""
    txns = None if seconds else 1

    async def one(kind: Bank | Items, s: int) -> int:
        stats = await run_workload(
            kind, upstream, pipe.pumps, pipe.tso, pipe.history, writers=3,
            duration=seconds, txns=txns, seed=s,
        )  # fmt: skip
        return stats.max_commit_ts

    a, b = await asyncio.gather(one(Bank("bank", accounts=100), seed), one(Items(), seed + 1))
    return max(a, b)


async def status(http: aiohttp.ClientSession, node: DrainerNode) -> dict[str, Any]:
    async with http.get(f"{node.status_url}/status") as resp:
        body: dict[str, Any] = await resp.json()
    return body["CatchUp"]  # type: ignore[no-any-return]


async def wait_status(
    http: aiohttp.ClientSession, node: DrainerNode, ok: Any, within: float = 240.0
) -> dict[str, Any]:
    deadline = time.monotonic() + within
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = await status(http, node)
        if ok(last):
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"catch-up status never got there: {last}")


async def checkpoint(server: MariaDBServer) -> int | None:
    return await mysql_checkpoint(server.host, server.port, server.user, server.password)


async def test_backlog_caught_up_by_spark_killed_once_then_streaming(
    mariadb_pair: MariaDBPair, tmp_path: Path
) -> None:
    # imported here, not at the top: tests.support.spark is a plugin other modules register
    from tests.support.spark import ensure_jar

    await asyncio.to_thread(ensure_jar)  # the job's JDBC driver
    up, down = mariadb_pair.upstream, mariadb_pair.downstream
    sink = f"{down.dsn()}?consistent=true"
    async with (
        running_pipeline(tmp_path, pumps=2) as pipe,
        open_upstream(up.dsn(), writers=8) as upstream,
        aiohttp.ClientSession() as http,
    ):
        cluster = pipe.cluster
        argv = flags(await pipe.tso.get_ts(), tmp_path)
        drainer = await cluster.start_drainer(sink, extra=argv)
        # the schema and the opening rows stream (a DDL would end a range anyway)
        await caught_up(
            down.host, down.port, down.user, down.password, await load(pipe, upstream, None, 1)
        )
        before = await checkpoint(down)
        assert before is not None
        assert (await status(http, drainer))["ranges_done"] == 0

        # the drainer is away while the backlog is written
        drainer.child.kill()
        backlog_ts = await load(pipe, upstream, 5.0, 10)
        await asyncio.sleep(LAG)
        drainer = await cluster.start_drainer(sink, extra=argv)

        # the job is killed once it is under way: the checkpoint stays at the range start
        running = await wait_status(
            http, drainer, lambda s: s["state"] == "running" and s["pid"] and s["progress"]
        )
        start = running["start_ts"]
        assert start >= before and running["rows"] > 100 and running["end_ts"] >= backlog_ts
        os.kill(running["pid"], signal.SIGKILL)
        await wait_status(http, drainer, lambda s: s["failures"] == 1)
        assert await checkpoint(down) == start

        # the rerun converges, then the checkpoint moves to the range end
        done = (await wait_status(http, drainer, lambda s: s["ranges_done"] == 1))["last_done"]
        assert (done["start_ts"], done["end_ts"]) == (start, running["end_ts"])
        # the killed attempt and its rerun (a loaded machine may add a retry of its own)
        assert done["attempts"] >= 2 and done["progress"][-1]["event"] == "done"
        # the job's progress reached its total, in /status and in the job's own log
        job = done["job"]
        assert job["rows_done"] == job["rows_total"] >= running["rows"] and job["percent"] == 100
        assert any(x.get("phase") == "rows" for x in done["progress"])
        total = f"{job['rows_total']:,}"
        final = f"catch-up: rows {total}/{total}"
        assert final in (tmp_path / "staging-job.log").read_text()
        await caught_up(down.host, down.port, down.user, down.password, backlog_ts)

        # streaming continues after the range: nothing lost, nothing applied twice
        after_ts = await load(pipe, upstream, 3.0, 20)
        await caught_up(down.host, down.port, down.user, down.password, after_ts)
        report = await compare(up.dsn(), down.dsn())
        assert report.equal, report.render_text()
        final = await status(http, drainer)  # (a lag may have started more ranges since)
        failures = done["attempts"] - 1
        assert final["rows_caught_up"] >= done["rows"] and final["failures"] == failures
        async with http.get(f"{drainer.status_url}/metrics") as resp:
            assert f"binlog_drainer_catchup_failed_job_count {failures}.0" in await resp.text()

        # binlogctl catchup-drainer: accepted (the drainer is caught up: a range with no rows
        # ends at once, no job runs)
        assert cluster.etcd is not None
        ctl = CtlConfig(cmd="catchup-drainer", pd_urls=(cluster.etcd.url,), node_id="drainer")
        applied = await request_catchup(ctl, "drainer")
        assert (applied.action, applied.accepted_state) == ("catchup", "requested")
        await caught_up(down.host, down.port, down.user, down.password, await pipe.tso.get_ts())
