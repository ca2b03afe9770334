"""The workload generator plays TiDB against a real MariaDB upstream and two real pumps: every
binlog it wrote, pulled back from the pumps, translated by the drainer's translator and applied
in commit-ts order to a SQLite sink, rebuilds exactly the upstream tables (bank and mixed, DDL
included), and the bank's total never moves."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.etcd import EtcdProcess
from tests.support.waits import eventually
from tests.support.workload_cluster import (
    assert_same_contents,
    cluster,
    pull_all,
    replicate,
)
from tributary.workload import (
    Bank,
    Mixed,
    MixedOptions,
    Table,
    columns,
    run_workload,
    total_balance,
)
from tributary.workload.mixed_tables import SHAPES
from tributary.workload.runner import build_env, run_writers
from tributary.workload.txn import BinlogWriter
from tributary.workload.upstream import open_upstream
from tributary.workload.upstream_sqlite import SqliteUpstream

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.etcd


async def test_bank_and_mixed_replicate_exactly(
    etcd: EtcdProcess, tmp_path: Path, mariadb: MariaDBDatabase
) -> None:
    bank = Bank(mariadb.name, accounts=30)
    mixed_db = f"{mariadb.name}_mixed"
    mixed = Mixed(mixed_db, MixedOptions(ddl_ratio=0.08, initial_rows=20))
    try:
        async with (
            cluster(etcd, tmp_path) as c,
            open_upstream(mariadb.server.dsn(), writers=6) as up,
        ):
            writer: BinlogWriter = c.client
            bank_stats, mixed_stats = await asyncio.gather(
                run_workload(bank, up, writer, c.tso, c.history, writers=6, txns=120, seed=1),
                run_workload(mixed, up, writer, c.tso, c.history, writers=4, txns=150, seed=2),
            )
            assert await total_balance(up, bank.schema) == bank.expected_total
            for stats in (bank_stats, mixed_stats):
                assert stats.commits > 20 and stats.failures == 0, stats
            assert mixed_stats.ddls > 5  # the database and 4 tables, then some mid-stream
            assert c.client.pending_commits == 0  # every prewrite got its commit or rollback

            upto = max(bank_stats.max_commit_ts, mixed_stats.max_commit_ts)
            items = await pull_all(c, upto)
            expected = bank_stats.commits + bank_stats.ddls + mixed_stats.commits + mixed_stats.ddls
            assert len(items) == expected
            down = tmp_path / "down.db"
            await replicate(c, items, down)
            assert await assert_same_contents(c, up, down, bank.schema) == 30
            assert await assert_same_contents(c, up, down, mixed_db) > 0
            sink = await SqliteUpstream.open(down)
            try:
                assert await total_balance(sink, bank.schema) == bank.expected_total
            finally:
                await sink.close()
    finally:
        mariadb.server.admin(f"DROP DATABASE IF EXISTS `{mixed_db}`")


async def test_every_ddl_kind_mid_stream(
    etcd: EtcdProcess, tmp_path: Path, mariadb: MariaDBDatabase
) -> None:
    """While three writers run the mixed DML, one of each DDL runs on the tables they write."""
    db = mariadb.name
    mixed = Mixed(db, MixedOptions(ddl_ratio=0, initial_rows=20))
    async with cluster(etcd, tmp_path) as c, open_upstream(mariadb.server.dsn(), writers=4) as up:
        env = await build_env(up, c.client, c.tso, c.history)
        await mixed.setup(env)
        stop = asyncio.Event()

        def table(name: str) -> Table:
            found = env.catalog.table(db, name)
            assert found is not None, name
            return found

        async def script() -> None:
            steps: list[Callable[[], Awaitable[object]]] = [
                lambda: env.ddl.add_column(
                    table("sbtest"), columns.int_("extra", not_null=True, default="7")
                ),
                lambda: env.ddl.add_index(table("sbtest"), "idx_pad", ("pad",)),
                lambda: env.ddl.drop_column(table("alltypes"), "tx"),
                lambda: env.ddl.add_column(
                    table("alltypes"), columns.varchar("note", 16, default="'n'")
                ),
                lambda: env.ddl.truncate_table(table("composite")),
                lambda: env.ddl.rename_table(table("nopk"), "nopk2"),
                lambda: env.ddl.create_table(db, dataclasses.replace(SHAPES[0], name="dyn_a")),
                lambda: env.ddl.drop_table(table("dyn_a")),
            ]

            async def some_commits() -> None:
                target = env.stats.commits + 3
                await eventually(lambda: env.stats.commits >= target, within=60)

            try:
                for ddl in steps:  # each DDL lands among transactions, before and after it
                    await some_commits()
                    await ddl()
                await some_commits()
            finally:
                stop.set()

        async with asyncio.TaskGroup() as tg:
            tg.create_task(script(), name="test-ddl-script")
            tg.create_task(run_writers(env, mixed, writers=3, stop=stop, seed=5), name="test-dml")
        assert env.stats.ddls == 5 + 8 and env.stats.failures == 0
        assert table("sbtest").info.column("extra") is not None
        assert table("alltypes").info.column("tx") is None
        assert env.catalog.table(db, "nopk") is None and env.catalog.table(db, "dyn_a") is None
        assert env.stats.commits > 20
        items = await pull_all(c, env.stats.max_commit_ts)
        await replicate(c, items, tmp_path / "down.db")
        assert await assert_same_contents(c, up, tmp_path / "down.db", db) > 0
