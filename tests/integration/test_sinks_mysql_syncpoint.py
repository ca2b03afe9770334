"""The sync point store on real downstreams: MariaDB, and TiDB's own tidb-server.

Proves: the store creates TiCDC's ``tidb_cdc.syncpoint_v1`` (columns, types, nullability, the
primary key ``(changefeed, primary_ts)`` and the ``created_at`` index); a write puts one row
per point with the cluster and changefeed ids, ``secondary_ts`` ``'0'`` on MariaDB, and deletes
this changefeed's rows older than the retention, not younger ones nor other changefeeds' or
clusters'; a point written again keeps its first row; a write the gate refuses leaves nothing
and the store works after it. On TiDB, ``secondary_ts`` is the transaction's
``@@tidb_current_ts`` and the global ``tidb_external_ts`` is set to it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncmy
import pytest

from tests.support.tidb import running_tidb
from tributary.sinks import WriteRefused
from tributary.sinks.schemes import open_sync_point_store
from tributary.sinks.syncpoints import SyncPointOptions
from tributary.wire.ts import compose, physical_ms

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(120)

HOUR = 3600.0
COLUMNS = [  # name, type, nullable, key, default (MariaDB's spelling): TiCDC's CREATE TABLE
    ("ticdc_cluster_id", "varchar(255)", "YES", "", "NULL"),
    ("changefeed", "varchar(255)", "NO", "PRI", None),
    ("primary_ts", "varchar(18)", "NO", "PRI", None),
    ("secondary_ts", "varchar(18)", "YES", "", "NULL"),
    ("created_at", "timestamp", "NO", "MUL", "current_timestamp()"),
]


async def tidb_rows(port: int, sql: str) -> list[Any]:
    conn = await asyncmy.connect(host="127.0.0.1", port=port, user="root", autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute(sql)
            return list(await cur.fetchall())
    finally:
        conn.close()


def refuse() -> None:
    raise WriteRefused("the lease fence is down")


async def test_mariadb_table_rows_retention_and_gate(mariadb_instance: InstanceFactory) -> None:
    down = mariadb_instance("down")
    q = down.query
    opts = SyncPointOptions("default", "cf-1", HOUR)
    async with open_sync_point_store(down.dsn(), opts) as store:
        columns = await q(
            "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, COLUMN_DEFAULT"
            " FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = 'tidb_cdc' AND TABLE_NAME = 'syncpoint_v1'"
            " ORDER BY ORDINAL_POSITION"
        )
        assert [tuple(c) for c in columns] == COLUMNS
        keys = await q(
            "SELECT INDEX_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX)"
            " FROM information_schema.STATISTICS"
            " WHERE TABLE_SCHEMA = 'tidb_cdc' AND TABLE_NAME = 'syncpoint_v1'"
            " GROUP BY INDEX_NAME ORDER BY INDEX_NAME"
        )
        assert [tuple(k) for k in keys] == [
            ("created_at", "created_at"),
            ("PRIMARY", "changefeed,primary_ts"),
        ]
        for cluster, feed, ts, age in (
            ("default", "cf-1", "11", "2 HOUR"),  # expired: deleted by the next write
            ("default", "cf-1", "12", "30 MINUTE"),  # within the retention
            ("default", "cf-2", "13", "2 HOUR"),  # another changefeed's
            ("other", "cf-1", "14", "2 HOUR"),  # another cluster's changefeed of that name
        ):
            await down.execute(
                "INSERT INTO tidb_cdc.syncpoint_v1 VALUES (%s, %s, %s, '0', NOW() - INTERVAL "
                + age
                + ")",
                (cluster, feed, ts),
            )
        p1, p2, p3 = (compose(1_700_000_010_000 + i * 30_000, 0) for i in range(3))
        await store.write([p1, p2])
        got = await q(
            "SELECT ticdc_cluster_id, changefeed, primary_ts, secondary_ts"
            " FROM tidb_cdc.syncpoint_v1 ORDER BY ticdc_cluster_id, changefeed, primary_ts"
        )
        assert [tuple(r) for r in got] == [
            ("default", "cf-1", "12", "0"),
            ("default", "cf-1", str(p1), "0"),
            ("default", "cf-1", str(p2), "0"),
            ("default", "cf-2", "13", "0"),
            ("other", "cf-1", "14", "0"),
        ]
        [(first,)] = await q(
            f"SELECT created_at FROM tidb_cdc.syncpoint_v1 WHERE primary_ts = {p2}"
        )
        store.write_gate = refuse
        with pytest.raises(WriteRefused):
            await store.write([p3])
        store.write_gate = None
        await asyncio.sleep(1.1)  # created_at has whole seconds
        await store.write([p2, p3])  # p2 again: its first row stays
        [(again,)] = await q(
            f"SELECT created_at FROM tidb_cdc.syncpoint_v1 WHERE primary_ts = {p2}"
        )
        assert again == first
        mine = await q(
            "SELECT primary_ts FROM tidb_cdc.syncpoint_v1"
            " WHERE ticdc_cluster_id = 'default' AND changefeed = 'cf-1' ORDER BY primary_ts"
        )
        assert [r[0] for r in mine] == sorted(["12", str(p1), str(p2), str(p3)])
    async with open_sync_point_store(down.dsn(), opts):  # the table exists: opens as well
        pass


@pytest.fixture
def tidb_port(tmp_path: Path) -> Iterator[int]:
    """A standalone tidb-server (its embedded store, binlog off), its SQL port."""
    with running_tidb(tmp_path / "tidb") as tidb:
        yield tidb.port


async def test_tidb_records_its_current_ts_and_sets_the_external_ts(tidb_port: int) -> None:
    url = f"mysql://root@127.0.0.1:{tidb_port}/"
    point = compose(1_700_000_010_000, 0)
    before = int(time.time() * 1000)
    async with open_sync_point_store(url, SyncPointOptions("default", "cf-1", HOUR)) as store:
        await store.write([point])
    [(primary, secondary)] = await tidb_rows(
        tidb_port, "SELECT primary_ts, secondary_ts FROM tidb_cdc.syncpoint_v1"
    )
    assert primary == str(point)
    assert before - 5000 <= physical_ms(int(secondary)) <= int(time.time() * 1000) + 5000
    [(external,)] = await tidb_rows(tidb_port, "SELECT @@GLOBAL.tidb_external_ts")
    assert int(external) == int(secondary)
