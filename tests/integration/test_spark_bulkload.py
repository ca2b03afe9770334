"""Bulk load through real Spark from a real MariaDB while writers keep writing, then streaming
from the recorded position (the upstream's binlog replayed from it by ``mariadb-binlog``):
downstream equals upstream, with no gap (a missed change shows as a difference) and no double
(a replayed insert of a row the snapshot already had fails the replay on its duplicate key)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from services.spark.bulkload import bulk_load
from services.spark.jdbc import MysqlEndpoint
from tests.support.job_progress import Recorded
from tributary.checker import compare

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.support.mariadb import MariaDBPair, MariaDBServer

pytest_plugins = ["tests.support.mariadb", "tests.support.spark"]
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

DDL = "CREATE TABLE bulk.t (id BIGINT PRIMARY KEY, v VARCHAR(40) NOT NULL, n INT)"


async def write_until(server: MariaDBServer, stop: asyncio.Event, first: int) -> int:
    """Inserts new rows and updates old ones until ``stop``; how many statements ran."""
    done, next_id = 0, first
    async with server.connect("bulk") as conn, conn.cursor() as cur:
        while not stop.is_set():
            await cur.execute("INSERT INTO t VALUES (%s, %s, %s)", (next_id, f"w{next_id}", done))
            await cur.execute("UPDATE t SET n = n + 1 WHERE id = %s", (next_id % 3000 + 1,))
            next_id += 1
            done += 2
            await asyncio.sleep(0.005)
    return done


def replay(up: MariaDBServer, down: MariaDBServer, file: str, pos: int) -> None:
    binlog = shutil.which("mariadb-binlog") or "mysqlbinlog"
    client = shutil.which("mariadb") or "mysql"

    def auth(s: MariaDBServer) -> list[str]:
        return [
            "--no-defaults",
            "--protocol=TCP",
            f"--host={s.host}",
            f"--port={s.port}",
            f"--user={s.user}",
            f"--password={s.password}",
        ]

    dump = subprocess.run(
        [
            binlog,
            *auth(up)[:1],
            "--read-from-remote-server",
            *auth(up)[1:],
            f"--start-position={pos}",
            "--to-last-log",
            "--database=bulk",
            file,
        ],
        capture_output=True,
        check=True,
    )
    subprocess.run([client, *auth(down)], input=dump.stdout, capture_output=True, check=True)


async def test_bulk_load_then_stream_from_the_position(
    spark: SparkSession, mariadb_pair: MariaDBPair
) -> None:
    up, down = mariadb_pair.upstream, mariadb_pair.downstream
    for server in (up, down):
        await server.execute("CREATE DATABASE bulk")
        await server.execute(DDL)
    values = ",".join(f"({i}, 'v{i}', {i})" for i in range(1, 3001))
    await up.execute(f"INSERT INTO bulk.t VALUES {values}")

    stop = asyncio.Event()
    writer = asyncio.create_task(write_until(up, stop, 100_000), name="test-writer")
    await asyncio.sleep(0.5)
    seen = Recorded("bulk load")
    position = await asyncio.to_thread(
        bulk_load,
        spark,
        MysqlEndpoint.from_url(up.dsn()),
        "bulk",
        "t",
        down.dsn(),
        seen.progress,
        partitions=3,
    )
    await asyncio.sleep(0.5)  # writes after the load too
    stop.set()
    assert await writer > 20
    assert position.rows >= 3000 and position.binlog_file and position.gtid_binlog_pos
    seen.assert_reached(position.rows)

    await asyncio.to_thread(replay, up, down, position.binlog_file, position.binlog_pos)
    report = await compare(up.dsn(), down.dsn())
    assert report.equal, report.render_text()
