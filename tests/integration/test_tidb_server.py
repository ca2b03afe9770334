"""A real tidb-server writes its binlogs through our pumps, end to end.

TiDB's own server (embedded store, binlog on) takes SQL through its MySQL port; its pump client
finds our two pumps through our TSO (PD's protocol and etcd's API on one port); a drainer
process reads TiDB's DDL jobs from its status API and applies everything to MariaDB; the checker
then finds MariaDB equal to TiDB. Each test has a pipeline of its own (TiDB starts in about 3 s,
the whole pipeline in about 13 s):

* every column type TiDB has, with its bounds and NULLs, in multi-row and multi-statement
  transactions, explicit rollbacks, pessimistic and optimistic transactions, three kinds of
  row handle (int primary key, clustered composite key, hidden row id);
* DDL (databases, tables, columns with defaults, indexes, renames, truncate, partitions) while
  writers keep changing the same tables;
* a pump SIGKILLed and restarted under load, then the other taken offline with binlogctl.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncmy.errors
import pytest
from asyncmy.constants import CLIENT

from services.binlogctl.cli import main as binlogctl
from tests.support.tidb import (
    TidbPipeline,
    TidbServer,
    WriteCounts,
    running_tidb_pipeline,
    write_until,
)
from tributary.checker import compare
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.slow]


@pytest.fixture
def pipe(tmp_path: Path, mariadb_template: Path) -> Iterator[TidbPipeline]:
    with running_tidb_pipeline(tmp_path, mariadb_template) as p:
        yield p


async def assert_replicated(pipe: TidbPipeline, *databases: str) -> None:
    await pipe.caught_up()
    for db in databases:
        report = await compare(pipe.tidb.dsn(db), pipe.downstream.dsn(db))
        assert report.equal, report.render_text()
        assert report.tables, f"nothing compared in {db}"
    assert pipe.drainer.running


# -- every column type ----------------------------------------------------------------------

TYPES = """
CREATE TABLE types.t (
  id BIGINT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, biu BIGINT UNSIGNED, bo BOOL,
  d DECIMAL(10,2), dl DECIMAL(65,30), du DECIMAL(5,0) UNSIGNED,
  f FLOAT, db DOUBLE,
  b1 BIT(1), b10 BIT(10), b64 BIT(64),
  c CHAR(10) COLLATE utf8mb4_bin, vc VARCHAR(100) COLLATE utf8mb4_general_ci,
  vu VARCHAR(40) COLLATE utf8mb4_unicode_ci, vl VARCHAR(20) CHARACTER SET latin1,
  va VARCHAR(20) CHARACTER SET ascii,
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
  tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  bn BINARY(8), vb VARBINARY(64),
  dt DATE, tm TIME, tm6 TIME(6), dtm DATETIME, dtm6 DATETIME(6),
  ts TIMESTAMP NULL DEFAULT NULL, ts3 TIMESTAMP(3) NULL DEFAULT NULL, y YEAR,
  e ENUM('a','b','c d'), s SET('x','y','z'),
  j JSON
)"""
COLUMNS = (
    "id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, bo, d, dl, du, f, db, b1, b10, b64, c, vc,"
    " vu, vl, va, tt, tx, mt, lt, tb, bl, mb, lb, bn, vb, dt, tm, tm6, dtm, dtm6, ts, ts3, y,"
    " e, s, j"
)
NCOLS = len(COLUMNS.split(","))
SMALLEST = (
    1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, False,
    "-99999999.99", "-" + "9" * 35 + "." + "9" * 30, "0", -3.40282e38, -1.7976931348623157e308,
    b"\x00", b"\x00\x00", b"\x00" * 8, "", "", "", "", "", "", "", "", "", b"", b"", b"", b"",
    b"", b"", "1000-01-01", "-838:59:59", "-838:59:59.000000", "1000-01-01 00:00:00",
    "1000-01-01 00:00:00.000000", "1970-01-01 00:00:01", "1970-01-01 00:00:01.000", 1901, "a",
    "", "null",
)  # fmt: skip
LARGEST = (
    2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295,
    9223372036854775807, 18446744073709551615, True, "99999999.99",
    "9" * 35 + "." + "9" * 30, "99999", 3.40282e38, 1.7976931348623157e308, b"\x01",
    b"\x03\xff", b"\xff" * 8, "z" * 10, "Ω" * 100, "ß" * 40, "é" * 20, "~" * 20, "ü" * 63,
    "ä" * 21845, "m" * 70000, "l" * 300000, b"\xff" * 255, b"\xfe" * 65535, b"\x01" * 70000,
    b"\x02" * 300000, b"\xff" * 8, b"\xff" * 64, "9999-12-31", "838:59:59",
    "838:59:59.000000", "9999-12-31 23:59:59", "9999-12-31 23:59:59.999999",
    "2038-01-19 03:14:07", "2038-01-19 03:14:07.999", 2155, "c d", "x,y,z",
    '{"k": [1, 2.5, "s", true, false, null, {"n": 18446744073709551615}], "u": "\\u00e9🙂"}',
)  # fmt: skip
ORDINARY = (
    3, 0, 7, -1, 1, 0, 100, 42, 4000000000, -1, 9223372036854775808, True, "0.01",
    "0.000000000000000000000000000001", "12345", 1.5, -0.1, b"\x01", b"\x01\x02",
    b"\x80" + b"\x00" * 7, "a ", "Hello, World", "straße", "café", "plain", "😀 4-byte",
    "line\nbreak\ttab", "'quote' \"dq\" \\back", "", b"\x00\x01", b"\x00", b"", b"\x00" * 3,
    b"ab", b"\x00\xffz", "2024-02-29", "-00:00:01", "12:34:56.789012", "2024-02-29 12:00:00",
    "2024-02-29 23:59:59.000001", "2024-06-30 12:00:00", "2024-06-30 12:00:00.123", 2000,
    "b", "x,z", "[1, 2, {\"a\": []}, \"x\", -5, 3.25e-7]",
)  # fmt: skip
NULLS = (4, *([None] * (NCOLS - 1)))


WRITE_CONFLICT = 9007  # TiDB's ErrWriteConflict
KEYED = (
    # a clustered composite primary key (TiDB's common handle), generated columns beside it
    "CREATE TABLE types.ck (a VARCHAR(20), b INT, v JSON, n DECIMAL(8,3),"
    " g INT AS (b * 2) VIRTUAL, gs VARCHAR(30) AS (CONCAT(a, '/', b)) STORED,"
    " PRIMARY KEY (a, b) CLUSTERED)",
    # an int primary key that is not the handle, and a unique key
    "CREATE TABLE types.nc (id INT PRIMARY KEY NONCLUSTERED, u VARCHAR(10), w INT, UNIQUE KEY (u))",
    # no key at all: the hidden _tidb_rowid is the handle
    "CREATE TABLE types.nokey (a INT, b VARCHAR(10), c DATETIME(3))",
    "CREATE TABLE types.ai (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT, t TIMESTAMP(6)"
    " DEFAULT CURRENT_TIMESTAMP(6))",
)
JSON_SHAPES = (
    # TiDB's binary JSON keeps the SQL types of these: date, time, datetime, decimal, opaque
    "JSON_OBJECT('d', CAST('2020-01-02' AS DATE), 't', CAST('01:02:03.5' AS TIME(1)),"
    " 'dt', CAST('2020-01-02 03:04:05.123456' AS DATETIME(6)), 'dec', CAST(1.50 AS DECIMAL(5,2)),"
    " 'bin', CAST(x'00ff' AS JSON))",
    "JSON_ARRAY()",
    "JSON_OBJECT()",
    "CAST('\"a string\"' AS JSON)",
    "CAST('-0.0' AS JSON)",
    "CAST('1e308' AS JSON)",
    "CAST('-9223372036854775808' AS JSON)",
    "JSON_ARRAY(JSON_OBJECT('deep', JSON_ARRAY(JSON_OBJECT('x', NULL))), TRUE, 'ü')",
)


async def txn(conn: Any, begin: str, *statements: str, commit: bool = True) -> None:
    async with conn.cursor() as cur:
        await cur.execute(begin)
        for sql in statements:
            await cur.execute(sql)
        await cur.execute("COMMIT" if commit else "ROLLBACK")


async def test_every_type_and_transaction_shape(pipe: TidbPipeline) -> None:
    tidb = pipe.tidb
    async with tidb.connect(client_flag=CLIENT.MULTI_STATEMENTS) as conn:
        async with conn.cursor() as cur:
            await cur.execute("CREATE DATABASE types")
            await cur.execute(TYPES)
            for sql in KEYED:
                await cur.execute(sql)
            marks = ", ".join(["%s"] * NCOLS)
            insert = f"INSERT INTO types.t ({COLUMNS}) VALUES ({marks})"
            await cur.executemany(insert, [SMALLEST, LARGEST, ORDINARY, NULLS])  # one statement
            for i, doc in enumerate(JSON_SHAPES):
                await cur.execute(
                    f"INSERT INTO types.ck (a, b, v, n) VALUES ('json', {i}, {doc}, {i}.5)"
                )
        await txn(  # pessimistic (TiDB's default), several tables, a row changed three times
            conn,
            "BEGIN PESSIMISTIC",
            "INSERT INTO types.nc VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)",
            "INSERT INTO types.nokey VALUES (1, 'x', '2020-01-01 00:00:00.001'), (1, 'x', NULL),"
            " (2, NULL, NULL)",
            "INSERT INTO types.ck (a, b, v, n) VALUES ('k', 1, '[]', -1),"
            " ('k', 2, '{}', 99999.999)",
            "UPDATE types.t SET ti = ti - 1, vc = 'changed', j = JSON_SET(j, '$.k[0]', 'new')"
            " WHERE id = 2",
            "UPDATE types.nc SET w = w * 10 WHERE id = 2",
            "UPDATE types.nc SET w = w + 1 WHERE id = 2",
            "DELETE FROM types.t WHERE id = 4",
        )
        await txn(  # optimistic: handles change (int key, composite key, unique key)
            conn,
            "BEGIN OPTIMISTIC",
            "UPDATE types.t SET id = 30, dtm6 = '2001-01-01 01:01:01.000001' WHERE id = 3",
            "UPDATE types.ck SET a = 'moved', b = 10 WHERE a = 'k' AND b = 1",
            "UPDATE types.nc SET u = 'uno' WHERE id = 1",
            "UPDATE types.nokey SET b = 'y' WHERE a = 1",
            "DELETE FROM types.nokey WHERE a = 2",
        )
        await txn(  # explicit rollbacks replicate nothing
            conn,
            "BEGIN PESSIMISTIC",
            "INSERT INTO types.nc VALUES (9, 'nine', 9)",
            "UPDATE types.t SET bi = 0",
            commit=False,
        )
        await txn(conn, "BEGIN OPTIMISTIC", "DELETE FROM types.ck", commit=False)
        async with conn.cursor() as cur:  # several statements in one query, one transaction
            await cur.execute(
                "BEGIN; REPLACE INTO types.nc VALUES (2, 'deux', 22);"
                " INSERT INTO types.nc VALUES (3, 'x', 0) ON DUPLICATE KEY UPDATE w = w + 100;"
                " DELETE FROM types.nc WHERE id = 1; COMMIT"
            )
            while await cur.nextset():
                pass
        # an optimistic transaction that fails at commit (a write conflict) is rolled back
        async with tidb.connect() as other, other.cursor() as cur2, conn.cursor() as cur:
            await cur.execute("BEGIN OPTIMISTIC")
            await cur.execute("INSERT INTO types.nc VALUES (7, 'seven', 7)")
            await cur2.execute("INSERT INTO types.nc VALUES (7, 'other', 0)")
            with pytest.raises(asyncmy.errors.OperationalError) as conflict:
                await cur.execute("COMMIT")
            assert conflict.value.args[0] == WRITE_CONFLICT
        async with conn.cursor() as cur:  # one big transaction
            await cur.execute("BEGIN")
            await cur.executemany(
                "INSERT INTO types.ai (v) VALUES (%s)", [(i,) for i in range(3000)]
            )
            await cur.execute("UPDATE types.ai SET v = -v WHERE v % 7 = 0")
            await cur.execute("COMMIT")
    await assert_replicated(pipe, "types")


# -- DDL while writers run ------------------------------------------------------------------

WRITTEN = (
    "CREATE TABLE ddl.w (id INT PRIMARY KEY, k INT, v VARCHAR(50), n INT DEFAULT 0)",
    "CREATE TABLE ddl.h (id BIGINT, k INT, v VARCHAR(50), PRIMARY KEY (id) CLUSTERED)"
    " PARTITION BY HASH (id) PARTITIONS 4",
)
DDL_STEPS = (
    "ALTER TABLE ddl.w ADD COLUMN c1 INT DEFAULT 7",
    "ALTER TABLE ddl.w ADD COLUMN c2 VARCHAR(20) NOT NULL DEFAULT 'dflt'",
    "ALTER TABLE ddl.w ADD INDEX ik (k)",
    "CREATE TABLE ddl.r (id INT PRIMARY KEY, d DATE, s VARCHAR(10)) PARTITION BY RANGE (id)"
    " (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200),"
    " PARTITION p2 VALUES LESS THAN (300))",
    "INSERT INTO ddl.r VALUES (1, '2020-01-01', 'a'), (150, NULL, 'b'), (250, '2021-02-03', 'c')",
    "ALTER TABLE ddl.w MODIFY COLUMN v VARCHAR(200)",
    "ALTER TABLE ddl.w ALTER COLUMN c1 SET DEFAULT 9",
    "ALTER TABLE ddl.w ADD UNIQUE INDEX uk (k, id)",
    "ALTER TABLE ddl.r TRUNCATE PARTITION p0",
    "INSERT INTO ddl.r VALUES (2, '2020-01-02', 'again')",
    "ALTER TABLE ddl.w MODIFY COLUMN k BIGINT",
    "ALTER TABLE ddl.r ADD PARTITION (PARTITION p3 VALUES LESS THAN (400))",
    "INSERT INTO ddl.r VALUES (399, '2022-12-31', 'p3')",
    "ALTER TABLE ddl.w DROP INDEX ik",
    "ALTER TABLE ddl.r DROP PARTITION p1",
    "ALTER TABLE ddl.w DROP COLUMN c1",
    "CREATE TABLE ddl.x LIKE ddl.r",
    "INSERT INTO ddl.x SELECT * FROM ddl.r",
    "RENAME TABLE ddl.x TO ddl.x2",
    "CREATE DATABASE ddl2",
    "RENAME TABLE ddl.x2 TO ddl2.x3",
    "ALTER TABLE ddl.w CHANGE COLUMN c2 c3 VARCHAR(30) NOT NULL DEFAULT 'renamed'",
    "TRUNCATE TABLE ddl2.x3",
    "INSERT INTO ddl2.x3 VALUES (5, '2023-05-05', 'after')",
    "ALTER TABLE ddl.w MODIFY COLUMN n VARCHAR(20) DEFAULT '0'",  # a change that rewrites rows
    "ALTER TABLE ddl.w ADD COLUMN m1 INT DEFAULT 1, ADD COLUMN m2 DATETIME"
    " DEFAULT '2020-01-01 00:00:00', ADD INDEX im (k)",  # TiDB's multi-schema change
    "CREATE DATABASE ddl3",
    "CREATE TABLE ddl3.t (a INT)",
    "INSERT INTO ddl3.t VALUES (1)",
    "DROP DATABASE ddl3",
    "CREATE TABLE ddl2.gone (a INT PRIMARY KEY)",
    "INSERT INTO ddl2.gone VALUES (1)",
    "DROP TABLE ddl2.gone",
    "TRUNCATE TABLE ddl.h",
    "ALTER TABLE ddl.w DROP COLUMN m2, DROP INDEX im",
    "ALTER TABLE ddl.w AUTO_INCREMENT = 5000",
    "ALTER TABLE ddl.w RENAME INDEX uk TO uk2",
)


@pytest.mark.timeout(300)  # about 35 s alone; a cold run's busy cores made it 120 s and more
async def test_ddl_while_writers_run(pipe: TidbPipeline) -> None:
    tidb = pipe.tidb
    async with tidb.connect() as conn, conn.cursor() as cur:
        await cur.execute("CREATE DATABASE ddl")
        for sql in WRITTEN:
            await cur.execute(sql)
    stop = asyncio.Event()
    counts = WriteCounts()
    async with asyncio.TaskGroup() as tg:
        for n, table in enumerate(("ddl.w", "ddl.w", "ddl.h")):
            tg.create_task(
                write_until(tidb, table, 1_000_000 * (n + 1), stop, counts), name=f"writer-{n}"
            )
        try:
            async with tidb.connect() as conn, conn.cursor() as cur:
                for sql in DDL_STEPS:
                    await asyncio.sleep(0.5)
                    await cur.execute(sql)
        finally:
            stop.set()
    assert counts.committed > 100, counts
    # Transactions that started before a DDL commit after its binlog (TiDB's metadata lock
    # holds the DDL until they end): written under the names the DDL gave.
    await late_transaction(
        tidb,
        ("INSERT INTO ddl.w (id, k, v, c3) VALUES (1, 1, 'late', 'c3')",
         "UPDATE ddl.w SET c3 = 'late too' WHERE id = 1000000"),
        "ALTER TABLE ddl.w RENAME COLUMN c3 TO c4",
    )  # fmt: skip
    await late_transaction(
        tidb, ("INSERT INTO ddl2.x3 VALUES (6, NULL, 'late')",), "RENAME TABLE ddl2.x3 TO ddl2.x4"
    )
    await assert_replicated(pipe, "ddl", "ddl2")


async def late_transaction(tidb: TidbServer, statements: Sequence[str], ddl: str) -> None:
    """``statements`` in a transaction that commits while ``ddl`` waits for it."""
    async with (
        tidb.connect(autocommit=False) as conn,
        conn.cursor() as cur,
        tidb.connect() as other,
        other.cursor() as ddl_cur,
    ):
        await cur.execute("BEGIN PESSIMISTIC")
        for sql in statements:
            await cur.execute(sql)
        running = asyncio.create_task(ddl_cur.execute(ddl), name="ddl")
        try:
            await asyncio.sleep(1)  # the DDL's binlog is written; the DDL waits for the lock
            assert not running.done(), "the DDL did not wait for the open transaction"
            await cur.execute("COMMIT")
        finally:
            await running


# -- pump faults under load -----------------------------------------------------------------


@pytest.mark.timeout(300)
async def test_pump_killed_and_restarted_then_one_taken_offline_under_load(
    pipe: TidbPipeline,
) -> None:
    tidb = pipe.tidb
    async with tidb.connect() as conn, conn.cursor() as cur:
        await cur.execute("CREATE DATABASE faults")
        for t in ("a", "b"):
            await cur.execute(f"CREATE TABLE faults.{t} (id INT PRIMARY KEY, k INT, v TEXT)")
    stop = asyncio.Event()
    counts = WriteCounts()
    async with asyncio.TaskGroup() as tg:
        for n, table in enumerate(("faults.a", "faults.a", "faults.b", "faults.b")):
            tg.create_task(
                write_until(tidb, table, 1_000_000 * (n + 1), stop, counts), name=f"writer-{n}"
            )
        try:
            await asyncio.sleep(4)
            before = counts.committed
            pipe.kill_pump(0)  # SIGKILL: its record stays online, TiDB's client moves on
            await asyncio.sleep(2)
            assert counts.committed > before, "TiDB stopped committing when pump-1 died"
            await asyncio.to_thread(pipe.restart_pump, 0)  # at its address, as a pod restarts
            # TiDB's client probes a pump it gave up every 30 s: pump-1 takes prewrites again
            # (with pump-2 gone before that, TiDB would find no pump and stop itself)
            await pipe.prewritten_to(0, await tidb.current_ts(), within=90)
            offline = await asyncio.to_thread(
                binlogctl,
                ["offline-pump", "--node-id", "pump-2", "--pd-urls", pipe.etcd.endpoint],
            )
            assert offline == 0
            during = counts.committed
            await asyncio.sleep(3)
            assert counts.committed > during, "TiDB stopped committing after pump-2 left"
        finally:
            stop.set()
    async with EtcdKv.connect([pipe.etcd.endpoint]) as kv:
        states = {s.node_id: s.state for s in await NodeRegistry(kv).list(NodeKind.PUMP)}
    assert states == {"pump-1": NodeState.ONLINE, "pump-2": NodeState.OFFLINE}
    await assert_replicated(pipe, "faults")
