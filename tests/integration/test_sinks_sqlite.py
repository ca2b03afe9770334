"""The SQLite sink on real files: crash consistency under SIGKILL, DDL mid-stream, locks, values.

The crash test runs a writer process applying bank transfers (each upstream transaction moves
money between two accounts and appends a ledger row with its commit ts), kills it with SIGKILL at
arbitrary moments and restarts it from the checkpoint. Readers during the run and after each kill
must see the total balance unchanged and exactly the ledger rows up to the checkpoint.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.bank_sqlite import (
    ACCOUNTS,
    START,
)
from tributary.change import Ddl, Row, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, UnsupportedDdl
from tributary.sinks.checkpoint import CheckpointRecord
from tributary.sinks.sqlite.sink import SqliteSink

ROOT = Path(__file__).resolve().parents[2]


def snapshot(path: Path) -> tuple[int, int, list[int]] | None:
    """(checkpoint, total balance, ledger ts) read in one read transaction; None before setup."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        db.execute("BEGIN")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "bank__ledger" not in tables:
            return None
        cp = db.execute("SELECT checkPoint FROM tidb_binlog__checkpoint").fetchone()[0]
        commit_ts = CheckpointRecord.from_json(cp).commit_ts
        (total,) = db.execute('SELECT COALESCE(SUM(bal), 0) FROM "bank__acct"').fetchone()
        ledger = [r[0] for r in db.execute('SELECT ts FROM "bank__ledger" ORDER BY ts')]
        db.execute("COMMIT")
        return commit_ts, total, ledger
    finally:
        db.close()


def assert_consistent(snap: tuple[int, int, list[int]] | None) -> int:
    if snap is None:
        return 0
    commit_ts, total, ledger = snap
    if commit_ts >= 4:
        assert total == ACCOUNTS * START
    assert ledger == list(range(5, commit_ts + 1))  # exactly the transactions up to it
    return commit_ts


@pytest.mark.slow
def test_sigkill_never_leaves_a_half_applied_batch(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    rng = random.Random(3)
    progress = [0]
    for _ in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.bank_sqlite", str(path)], cwd=ROOT
        )
        try:
            deadline = time.monotonic() + 60
            target = progress[-1] + rng.randint(100, 600)
            while progress[-1] < target:  # read while the writer writes
                assert proc.poll() is None, "writer died"
                assert time.monotonic() < deadline, "writer made no progress"
                progress.append(max(progress[-1], assert_consistent(snapshot(path))))
                time.sleep(0.01)
            time.sleep(rng.random() * 0.05)
        finally:
            proc.kill()
            proc.wait()
        progress.append(assert_consistent(snapshot(path)))
    assert progress[-1] > 400


async def test_ddl_mid_stream(tmp_path: Path) -> None:
    t = TableInfo.build("shop", "t", [("id", "int"), ("v", "varchar(5)")], ["id"])
    t2 = TableInfo.build("shop", "t", [("id", "int"), ("v", "varchar(5)"), ("n", "int")], ["id"])
    async with await SqliteSink.open(tmp_path / "d.db", cluster_id=1) as sink:
        await sink.apply(
            [
                Txn(
                    1,
                    ddl=Ddl(
                        "shop", "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5), KEY kv (v))"
                    ),
                ),
                Txn(2, rows=(RowChange.insert(t, {"id": 1, "v": "a"}),)),
                Txn(
                    3, ddl=Ddl("shop", "ALTER TABLE t ADD COLUMN n INT NOT NULL, ADD INDEX (n, v)")
                ),
                Txn(4, rows=(RowChange.insert(t2, {"id": 2, "v": "b", "n": 5}),)),
                Txn(5, ddl=Ddl("shop", "ALTER TABLE t DROP COLUMN v")),  # indexed twice
                Txn(6, ddl=Ddl("shop", "CREATE TABLE u (id INT PRIMARY KEY)")),
                Txn(7, ddl=Ddl("shop", "RENAME TABLE u TO w")),
            ]
        )
        db = sqlite3.connect(tmp_path / "d.db")
        assert db.execute('SELECT * FROM "shop__t" ORDER BY id').fetchall() == [(1, 0), (2, 5)]
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert names == {"shop__t", "shop__w", "tidb_binlog__checkpoint"}
        # A batch with an unsupported DDL after a supported one: nothing of it stays.
        with pytest.raises(UnsupportedDdl, match=r"commit ts 9: .*MODIFY"):
            await sink.apply(
                [
                    Txn(8, ddl=Ddl("shop", "TRUNCATE TABLE t")),
                    Txn(9, ddl=Ddl("shop", "ALTER TABLE t MODIFY n BIGINT")),
                ]
            )
        assert await sink.checkpoint() == 7
        assert db.execute('SELECT count(*) FROM "shop__t"').fetchone() == (2,)
        await sink.apply([Txn(8, ddl=Ddl("shop", "TRUNCATE TABLE t"))])
        assert db.execute('SELECT count(*) FROM "shop__t"').fetchone() == (0,)
        await sink.apply([Txn(10, ddl=Ddl("shop", "DROP DATABASE shop"))])
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert names == {"tidb_binlog__checkpoint"}
        db.close()


async def test_a_locked_database_is_a_retriable_error(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    async with await SqliteSink.open(path, cluster_id=1, busy_timeout_ms=50) as sink:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        with pytest.raises(SinkError) as e:
            await sink.apply([Txn(5)])
        assert e.value.retriable
        other.execute("ROLLBACK")
        other.close()
        await sink.apply([Txn(5)])
        assert await sink.checkpoint() == 5


async def test_values_keep_their_exact_form(tmp_path: Path) -> None:
    t = TableInfo.build(
        "v",
        "t",
        [("id", "bigint unsigned"), ("d", "decimal(6,2)"), ("f", "double"), ("b", "varbinary(4)")],
        ["id"],
    )
    ddl = (
        "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, d DECIMAL(6,2), f DOUBLE, b VARBINARY(4))"
    )
    rows: list[Row] = [
        {"id": 2**64 - 1, "d": Decimal("1.50"), "f": 0.25, "b": b"\x00\xff"},
        {"id": 3, "d": "-2.00", "f": None, "b": None},
    ]
    async with await SqliteSink.open(tmp_path / "v.db", cluster_id=1) as sink:
        await sink.apply(
            [Txn(1, ddl=Ddl("v", ddl)), Txn(2, rows=tuple(RowChange.insert(t, r) for r in rows))]
        )
    db = sqlite3.connect(tmp_path / "v.db")
    got = db.execute('SELECT id, d, f, b FROM "v__t" ORDER BY d').fetchall()
    assert got == [(3, "-2.00", None, None), (str(2**64 - 1), "1.50", 0.25, b"\x00\xff")]
    db.close()


async def test_cancelled_apply_leaves_nothing(tmp_path: Path) -> None:
    t = TableInfo.build("c", "t", [("id", "int")], ["id"])
    big = tuple(RowChange.insert(t, {"id": i}) for i in range(200_000))
    async with await SqliteSink.open(tmp_path / "c.db", cluster_id=1) as sink:
        await sink.apply([Txn(1, ddl=Ddl("c", "CREATE TABLE t (id INT PRIMARY KEY)"))])
        task = asyncio.create_task(sink.apply([Txn(2, rows=big)]), name="big-apply")
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await sink.checkpoint() == 1
        await sink.apply([Txn(3, rows=big[:10])])  # the sink is still usable
    db = sqlite3.connect(tmp_path / "c.db")
    assert db.execute('SELECT count(*) FROM "c__t"').fetchone() == (10,)
    db.close()
