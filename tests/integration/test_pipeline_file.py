"""A real drainer process writing tidb-binlog's binlog files (``file://``), then reparo replaying
them into SQLite: the files carry every transaction and DDL, once, in commit order."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from services.reparo.cli import main as reparo
from tests.support.pipeline import ORDERS, commit, ddl, row, running_pipeline
from tributary.ddlhistory import Action
from tributary.sinks.file.sink import load_savepoint

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(180)]


async def test_drainer_file_sink_replayed_by_reparo(tmp_path: Path) -> None:
    files, replica = tmp_path / "binlogs", tmp_path / "replica.db"
    async with running_pipeline(tmp_path, pumps=2) as pipe:
        first = await pipe.tso.get_ts()
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        last = 0
        for rid in range(1, 41):
            last = await commit(pipe, row(ORDERS.id, version, rid))
        start = ["--initial-commit-ts", str(first)]
        drainer = await pipe.cluster.start_drainer(f"file://{files}", extra=start)
        async with asyncio.timeout(60):
            while (saved := load_savepoint(files)) is None or saved.commit_ts < last:
                assert drainer.child.running
                await asyncio.sleep(0.2)
        assert await drainer.child.stop(30) == 0

    code = await asyncio.to_thread(
        reparo, ["--data-dir", str(files), "--dest-url", f"sqlite://{replica}"]
    )
    assert code == 0
    with sqlite3.connect(replica) as db:
        ids = [r[0] for r in db.execute('SELECT id FROM "shop__orders" ORDER BY id')]
    assert ids == list(range(1, 41))
