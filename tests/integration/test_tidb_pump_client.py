"""TiDB's own pump client (tidb-binlog/pump_client, through tests/go/pumpwriter) writes through
our pumps to a MariaDB downstream, end to end.

The pumpwriter is given one URL, a binlog-tso's: it answers PD's GetMembers and Tso for the
pumpwriter's PD clients and relays etcd's API for its etcd client (the pump registry), as a
PD's client port does. The table is created by our workload library (upstream, DDL history,
DDL binlog); the rows then come only from Go: TiDB-codec inserts of (id, 1 KB v), first with
range selection, then with hash selection while a pump is killed and restarted and another
joins. The drainer (a real process) applies everything and the checker compares the upstream,
which the test fills with the same rows, with the downstream.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import gobin
from tests.support.pipeline import Pipeline, caught_up, running_pipeline
from tests.support.pump import start_pump_process
from tests.support.tso import members_up, tso_process
from tributary.checker import compare
from tributary.workload import open_upstream
from tributary.workload.columns import TableSpec, bigint, varchar
from tributary.workload.runner import build_env

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBPair, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(1200)]

SCHEMA, TABLE = "tidbgo", "rows"
SPEC = TableSpec(TABLE, (bigint("id", not_null=True), varchar("v", 2048)), primary_key=("id",))
HASH_FIRST_ID = 1_000_001


@pytest.fixture(scope="module")
def go_bin() -> Path:
    return gobin.build()


async def create_table(pipe: Pipeline, upstream_dsn: str) -> tuple[int, int]:
    """The table through our workload library: (table id, schema version) for the rows."""
    async with open_upstream(upstream_dsn, writers=2) as upstream:
        env = await build_env(upstream, pipe.pumps, pipe.tso, pipe.history)
        await env.ddl.create_database(SCHEMA)
        table = await env.ddl.create_table(SCHEMA, SPEC)
        return table.info.id, env.catalog.version


def committed_ids(summary: dict[str, Any]) -> list[int]:
    failed = set(summary["failed_ids"])
    return [i for i in range(summary["first_id"], summary["last_id"] + 1) if i not in failed]


async def fill_upstream(server: MariaDBServer, ids: list[int]) -> None:
    """The rows the pumpwriter wrote, written upstream too, so the checker has both sides."""
    async with server.connect(SCHEMA) as conn, conn.cursor() as cur:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            await cur.executemany(
                f"INSERT INTO `{TABLE}` (id, v) VALUES (%s, %s)",
                [(i, gobin.value(i)) for i in chunk],
            )


async def write(go_bin: Path, log: Path, tso_url: str, *args: str) -> gobin.GoRun:
    return await gobin.start(go_bin, "pumpwriter", log, f"-pd-urls={tso_url}", *args)


async def test_tidb_pump_client_through_our_pumps_with_pump_faults(
    go_bin: Path, mariadb_pair: MariaDBPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = mariadb_pair
    # A prewrite stored just before its pump is SIGKILLed may never be acknowledged: TiDB then
    # gives up on the transaction, and in a TiDB cluster the pump learns its fate from TiKV.
    # Here the writer reports such ids (they are left out of the expected rows) and the pumps
    # play that part by rolling a prewrite back once its commit is 20 s overdue.
    monkeypatch.setenv("PUMP_STORAGE_STUCK_PREWRITE_ACTION", "rollback")
    monkeypatch.setenv("PUMP_STORAGE_MAX_TXN_TIMEOUT", "20s")
    async with running_pipeline(tmp_path, pumps=2) as pipe, AsyncExitStack() as stack:
        cluster = pipe.cluster
        assert cluster.etcd is not None
        drainer = await cluster.start_drainer(f"{pair.downstream.dsn()}?consistent=true")
        with tso_process(cluster.etcd.url, tmp_path / "tso.log") as (tso_url, _):
            await members_up(tso_url, 3)  # two pumps' embedded members and the binlog-tso
            table_id, version = await create_table(pipe, pair.upstream.dsn())
            rows = ("-table-id", str(table_id), "-schema-version", str(version))

            ranged = await write(
                go_bin, tmp_path / "range.log", tso_url, *rows,
                "-strategy=range", "-writers=8", "-count=1500", "-first-id=1",
            )  # fmt: skip
            first = await ranged.summary(within=300)
            assert first["cluster_id"] == pipe.cluster_id, first
            assert first["committed"] > 0, first

            hashed = await write(
                go_bin, tmp_path / "hash.log", tso_url, *rows,
                "-strategy=hash", "-writers=8", "-duration=16s", f"-first-id={HASH_FIRST_ID}",
            )  # fmt: skip
            try:
                await asyncio.sleep(4)
                victim = cluster.pumps[0]
                victim.child.kill()  # SIGKILL: its commits wait for it, its prewrites move on
                await asyncio.sleep(2)
                # back at its address, as a pump restarts in a real deployment: TiDB's client
                # retries a commit on the pump of its prewrite without re-dialing its address
                restarted = await asyncio.to_thread(
                    start_pump_process,
                    victim.data_dir,
                    cluster.etcd.url,
                    *("--node-id", victim.name, "--gen-binlog-interval", "1"),
                    grpc_port=victim.grpc_port,
                    http_port=victim.grpc_port + 1,
                )
                stack.callback(restarted.kill)
                await asyncio.sleep(2)
                await cluster.start_pumps(1)  # joins while the client writes
                second = await hashed.summary(within=900)
            finally:
                hashed.kill()
            assert second["committed"] > 0, second
            assert first["commit_failed_ids"] == second["commit_failed_ids"] == [], second

        ids = committed_ids(first) + committed_ids(second)
        assert len(ids) == first["committed"] + second["committed"]
        await fill_upstream(pair.upstream, ids)
        d = pair.downstream
        await caught_up(
            d.host,
            d.port,
            d.user,
            d.password,
            max(first["max_commit_ts"], second["max_commit_ts"]),
            within=300,
        )
        report = await compare(pair.upstream.dsn(), d.dsn())
        assert report.equal, report.render_text()
        assert drainer.child.running
