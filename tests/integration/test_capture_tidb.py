"""A changefeed into TiDB: a capture reads a MariaDB upstream's binlog and writes into a real
tidb-server (binlog off) through a ``tidb://`` sink URL, TiDB's ``txn-total-size-limit``
lowered to 1 MiB (its default is 100 MiB).

Proves: the changefeed is spread by table as into ``mysql://`` (the tables there when it is
created, made on both sides); MariaDB's DDL text (a table created mid-run with its JSON alias
and table options, ``ADD COLUMN ... AFTER``, an index, a rename) runs on TiDB; under a write
load over three tables, with DDL mid-run, and after one MariaDB transaction of 3 MB (which
TiDB refuses as one transaction, so the sink applies it in pieces: the capture's log says
so), the checker finds the TiDB downstream equal to the MariaDB upstream, table by table.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.capture import (
    capture_cli,
    shop_equal,
    shop_load,
    start_capture,
    wait_for,
    write_shop,
)
from tests.support.tidb import TidbServer, running_tidb

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TABLES = ["t0", "t1", "t2"]
TABLE_DDL = [f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v INT)" for t in TABLES]
KINDS = (
    "CREATE TABLE shop.kinds (id INT PRIMARY KEY, u BIGINT UNSIGNED, d DECIMAL(20,6),"
    " dt DATETIME(6), tm TIME, y YEAR, e ENUM('a','b'), s SET('x','y'), b VARBINARY(16),"
    " c VARCHAR(20) COLLATE utf8mb4_general_ci, j JSON, big MEDIUMTEXT)"
    " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
)


async def test_changefeed_into_tidb_equal_to_mariadb(
    tmp_path: Path, etcd: EtcdProcess, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    limits = {"txn-total-size-limit": 1 << 20}
    with running_tidb(tmp_path / "tidb", limits) as tidb:
        log = tmp_path / "capture.log"
        capture, port = start_capture(etcd.endpoint, up.dsn() + "?server-id=4377", log)
        try:
            for ddl in ("CREATE DATABASE shop", *TABLE_DDL):  # both sides: spans of their own
                await up.execute(ddl)
                await sql(tidb, ddl)
            sink = f"tidb://root@{tidb.host}:{tidb.port}/"
            await capture_cli(port, "changefeed", "create", "-c", "cf-t", "--sink-uri", sink)
            await _write(up)
            report_tables = len(TABLES) + 1
            await wait_for(
                lambda: shop_equal(up, tidb, report_tables),  # type: ignore[arg-type]
                120,
                "the TiDB downstream equal to the MariaDB upstream",
            )
            listed = json.loads(await capture_cli(port, "capture", "list"))
            spans = {s for c in listed["items"] for v in c["tables"].values() for s in v}
            assert {"#ddl", "shop.t1", "shop.t2"} <= spans  # spread by table
        finally:
            capture.terminate()
            capture.wait(timeout=30)
    text = log.read_text(errors="replace")
    assert "too large for one transaction" in text and "pieces" in text


async def sql(tidb: TidbServer, text: str) -> None:
    async with tidb.connect() as conn, conn.cursor() as cur:
        await cur.execute(text)


async def _write(up: MariaDBServer) -> None:
    stop = asyncio.Event()
    load = asyncio.create_task(
        shop_load(up, TABLES, stop, seed=5, most_tables=2, keys=30, mixed=True), name="load"
    )
    await up.execute(KINDS)
    await write_shop(
        up,
        [
            "INSERT INTO kinds (id, u, d, dt, tm, y, e, s, b, c, j) VALUES"
            " (1, 18446744073709551615, -12345678901234.123456, '2024-02-29 23:59:59.999999',"
            " '-838:59:59', 2155, 'b', 'x,y', x'00ff', 'Straße',"
            ' \'{"k": [1, 2.5, "é"], "n": null}\'), (2, 0, 0, NULL, NULL, NULL, NULL, \'\','
            " '', '', '[]')",
        ],
    )
    await up.execute("ALTER TABLE shop.t1 ADD COLUMN w VARCHAR(10) NOT NULL DEFAULT 'w' AFTER id")
    await up.execute("ALTER TABLE shop.t2 ADD INDEX v_idx (v)")
    await asyncio.sleep(2)
    # one transaction of 1,500 rows of 2,000 characters: 3 MB, three times TiDB's limit here
    await write_shop(
        up,
        [
            "INSERT INTO kinds (id, big) VALUES "
            + ", ".join(f"({i}, REPEAT('{i % 10}', 2000))" for i in range(100, 1600))
        ],
    )
    stop.set()
    assert await load > 0
    await up.execute("RENAME TABLE shop.t0 TO shop.t0r")
