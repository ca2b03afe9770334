"""Bad input stops a real drainer process: an unknown table id in a committed binlog makes it
exit with an error naming that commit ts, with nothing after it applied or checkpointed; a
restart stops at the same place, and ``ignore-txn-commit-ts`` is the operator's way past it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from services.demo.procs import log_tail
from tests.support.pipeline import ORDERS, commit, ddl, row, running_pipeline
from tributary.ddlhistory import Action

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(180)]


async def exited(child: object, within: float = 60.0) -> int:
    async with asyncio.timeout(within):
        while child.running:  # type: ignore[attr-defined]  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    return int(child.proc.returncode)  # type: ignore[attr-defined]


def downstream(path: Path) -> tuple[int, list[int]]:
    with sqlite3.connect(path) as db:
        (ckpt,) = db.execute('SELECT checkPoint FROM "tidb_binlog__checkpoint"').fetchone()
        ids = [r[0] for r in db.execute('SELECT id FROM "shop__orders" ORDER BY id')]
    commit_ts = int(str(ckpt).split('"commitTS":')[1].split(",")[0])
    return commit_ts, ids


async def test_an_unknown_table_stops_the_drainer_naming_the_commit_ts(tmp_path: Path) -> None:
    db_file = tmp_path / "down.db"
    async with running_pipeline(tmp_path, pumps=1) as pipe:
        first = await pipe.tso.get_ts()
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        good = await commit(pipe, row(ORDERS.id, version, 1))
        bad = await commit(pipe, row(999, version, 2))  # no such table
        after = await commit(pipe, row(ORDERS.id, version, 3))

        sink = f"sqlite://{db_file}"
        start = ["--initial-commit-ts", str(first), "--checkpoint-interval", "0.2"]
        cluster = pipe.cluster
        drainer = await cluster.start_drainer(sink, extra=start, wait_ready=False)
        assert await exited(drainer.child) != 0
        assert f"commit ts {bad}" in log_tail(drainer.child.log_path, 20000)
        ckpt, ids = downstream(db_file)
        assert good <= ckpt < bad and ids == [1]

        again = await cluster.start_drainer(sink, extra=start, wait_ready=False)  # same place
        assert await exited(again.child) != 0
        assert downstream(db_file) == (ckpt, [1])

        skip = [*start, "--syncer-ignore-txn-commit-ts", str(bad)]
        past = await cluster.start_drainer(sink, extra=skip)
        deadline = asyncio.get_running_loop().time() + 60
        while downstream(db_file)[0] < after:
            assert past.child.running, log_tail(past.child.log_path)
            assert asyncio.get_running_loop().time() < deadline, "never got past it"
            await asyncio.sleep(0.2)
        assert downstream(db_file)[1] == [1, 3]
