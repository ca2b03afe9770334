"""TiDB as the drainer's downstream: a tidb-server (binlog on) writes through our pumps, and a
drainer told ``db-type = "tidb"`` with ``[syncer.to]`` in its drainer.toml, as tidb-binlog's
is, writes into a second tidb-server (binlog off) whose ``txn-total-size-limit`` is lowered to
1 MiB (TiDB's default is 100 MiB).

Proves: the checker finds the downstream TiDB equal to the upstream after tables of many
types, clustered and non-clustered keys, an AUTO_RANDOM key (explicit values, refused by TiDB
unless the session allows them), DDL (columns, indexes, renames, truncate, partitions) with
rows between, a burst of transactions bigger together than the limit, and one transaction of
3 MB, which TiDB refuses as one downstream transaction: the drainer's log says so, and it
applies it in pieces instead of failing; the checkpoint row in ``tidb_binlog.checkpoint`` ends
consistent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tidb import TidbPipeline, TidbServer, running_tidb_pipeline
from tributary.checker import compare

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(300)]

LIMIT = 1 << 20

SCHEMA = (
    "CREATE DATABASE down1",
    "CREATE TABLE down1.types (id BIGINT PRIMARY KEY, u BIGINT UNSIGNED, d DECIMAL(30,10),"
    " f DOUBLE, b BIT(10), c VARCHAR(40) COLLATE utf8mb4_general_ci, bl BLOB, dt DATETIME(6),"
    " tm TIME(3), ts TIMESTAMP(3) NULL, y YEAR, e ENUM('a','b'), s SET('x','y'), j JSON)",
    "CREATE TABLE down1.ck (a VARCHAR(20), b INT, v INT, PRIMARY KEY (a, b) CLUSTERED)",
    "CREATE TABLE down1.ar (id BIGINT AUTO_RANDOM PRIMARY KEY, v VARCHAR(20))",
    "CREATE TABLE down1.big (id INT PRIMARY KEY NONCLUSTERED, pad VARCHAR(3000), k INT, KEY (k))",
    "CREATE TABLE down1.parts (id INT, v INT) PARTITION BY RANGE (id)"
    " (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200))",
)
TYPES_ROWS = (
    "INSERT INTO down1.types VALUES (1, 18446744073709551615, -12345678901234567890.0123456789,"
    " 1.5e300, b'1010101010', 'Straße', x'00ff10', '2024-02-29 23:59:59.999999',"
    " '-838:59:59.000', '2038-01-19 03:14:07.999', 2155, 'b', 'x,y',"
    " JSON_OBJECT('k', JSON_ARRAY(1, 2.5, 'é'), 'n', NULL))",
    "INSERT INTO down1.types (id) VALUES (2)",
    "INSERT INTO down1.ck VALUES ('a', 1, 1), ('b', 2, 2), ('c', 3, 3)",
    "INSERT INTO down1.ar (v) VALUES ('one'), ('two'), ('three')",
    "INSERT INTO down1.parts VALUES (1, 1), (150, 2)",
)
DDL_AND_ROWS = (
    "ALTER TABLE down1.ck ADD COLUMN note VARCHAR(10) DEFAULT 'n'",
    "UPDATE down1.ck SET v = v * 10, note = 'x' WHERE a = 'b'",
    "ALTER TABLE down1.ck ADD INDEX (v)",
    "ALTER TABLE down1.parts ADD PARTITION (PARTITION p2 VALUES LESS THAN (300))",
    "INSERT INTO down1.parts VALUES (250, 3)",
    "ALTER TABLE down1.parts TRUNCATE PARTITION p0",
    "RENAME TABLE down1.ar TO down1.ar2",
    "INSERT INTO down1.ar2 (v) VALUES ('four')",
    "DELETE FROM down1.ck WHERE a = 'c'",
    "CREATE TABLE down1.gone (id INT PRIMARY KEY)",
    "TRUNCATE TABLE down1.types",
    "INSERT INTO down1.types (id, j) VALUES (3, '[1, {\"a\": null}]')",
    "DROP TABLE down1.gone",
)


@pytest.fixture
def pipe(tmp_path: Path) -> Iterator[TidbPipeline]:
    with running_tidb_pipeline(
        tmp_path, None, tidb_downstream={"txn-total-size-limit": LIMIT}
    ) as p:
        yield p


async def run(pipe: TidbPipeline, *statements: str) -> None:
    async with pipe.tidb.connect() as conn, conn.cursor() as cur:
        for sql in statements:
            await cur.execute(sql)


async def burst(pipe: TidbPipeline, first: int, count: int, rows: int) -> None:
    """``count`` transactions of ``rows`` rows of 2,000 characters into ``down1.big``, on four
    connections at once so that the drainer gets them together."""

    async def writer(lane: int) -> None:
        async with pipe.tidb.connect(autocommit=False) as conn, conn.cursor() as cur:
            for n in range(lane, count, 4):
                base = first + n * rows
                await cur.executemany(
                    "INSERT INTO down1.big VALUES (%s, %s, %s)",
                    [(i, f"{i:08d}" * 250, i % 7) for i in range(base, base + rows)],
                )
                await cur.execute("COMMIT")

    await asyncio.gather(*(writer(lane) for lane in range(4)))


async def test_drainer_into_tidb_with_a_lowered_transaction_limit(pipe: TidbPipeline) -> None:
    assert isinstance(pipe.downstream, TidbServer)
    await run(pipe, *SCHEMA, *TYPES_ROWS)
    for sql in DDL_AND_ROWS:
        await run(pipe, sql)
    await burst(pipe, 0, 40, 20)  # 40 transactions of 40 KB: 1.6 MB together
    # one transaction of 1,500 rows, 3 MB: three times what the downstream takes at once
    await burst(pipe, 10_000, 1, 1_500)
    await run(
        pipe,
        "UPDATE down1.big SET k = k + 1 WHERE id % 3 = 0",
        "DELETE FROM down1.big WHERE id % 10 = 1",
    )
    await pipe.caught_up(within=180)
    report = await compare(pipe.tidb.dsn("down1"), pipe.downstream.dsn("down1"))
    assert report.equal, report.render_text()
    tables = {t.table.split(".")[-1] for t in report.tables}
    assert tables == {"types", "ck", "ar2", "big", "parts"}
    assert sum(t.rows_upstream for t in report.tables if t.table.endswith("big")) > 1_000
    log = pipe.drainer.log_path.read_text(errors="replace")
    assert "too large for one transaction" in log
    assert "applied in" in log and "pieces" in log
    async with pipe.downstream.connect() as conn, conn.cursor() as cur:
        await cur.execute("SELECT checkPoint FROM tidb_binlog.checkpoint")
        [(text,)] = await cur.fetchall()
    assert json.loads(text)["consistent"] is True
    assert pipe.drainer.running
