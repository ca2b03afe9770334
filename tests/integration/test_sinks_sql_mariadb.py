"""The MySQL dialect of ``tributary.sql`` executed on a real MariaDB through asyncmy.

Also the consistent-mode recipe the MySQL sink will use: a batch's statements and the checkpoint
row in one InnoDB transaction, so a failure part way leaves neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncmy.errors
import pytest

from tributary.change import Ddl, RowChange, TableInfo
from tributary.sinks.checkpoint import (
    CheckpointRecord,
    checkpoint_load,
    checkpoint_save,
    checkpoint_setup,
)
from tributary.sinks.mysql.statements import mysql_ddl
from tributary.sql import MYSQL, Statement, delete, delete_many, insert, row_statements, update

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]


async def run(conn: Any, stmts: list[Statement]) -> None:
    async with conn.cursor() as cur:
        for s in stmts:
            await cur.execute(s.sql, s.args)


async def test_row_statements_on_mariadb(mariadb: MariaDBDatabase) -> None:
    db = mariadb.name
    odd = TableInfo.build(db, "50% `odd`", [("k", "int"), ("v", "varchar(5)")])
    acct = TableInfo.build(db, "acct", [("a", "int"), ("b", "int"), ("bal", "int")], ["a", "b"])
    await mariadb.execute("CREATE TABLE `50% ``odd``` (k INT, v VARCHAR(5))")
    await mariadb.execute("CREATE TABLE acct (a INT, b INT, bal INT, PRIMARY KEY (a, b))")
    async with mariadb.connect() as conn:
        dup = {"k": 1, "v": None}
        await run(conn, [insert(MYSQL, odd, [dup, dup, {"k": 2, "v": "x"}])])
        await run(conn, [update(MYSQL, odd, dup, {"k": 1, "v": "new"})])  # LIMIT 1: one of two
        await run(conn, [delete(MYSQL, odd, {"k": 2, "v": "x"})])
        rows = [{"a": i, "b": i % 2, "bal": 10 * i} for i in range(5)]
        await run(conn, [insert(MYSQL, acct, rows)])
        await run(conn, [delete_many(MYSQL, acct, rows[:2])])
        old, new = rows[2], {**rows[2], "a": 9}
        for _ in range(2):  # safe mode: a replay lands on the same state
            change = RowChange.update(acct, old, new)
            await run(conn, row_statements(MYSQL, change, safe=True))
            await run(conn, row_statements(MYSQL, RowChange.insert(acct, rows[3]), safe=True))
    assert sorted(await mariadb.query("SELECT k, v FROM `50% ``odd```"), key=str) == [
        (1, "new"),
        (1, None),
    ]
    assert await mariadb.query("SELECT a, b, bal FROM acct ORDER BY a") == [
        (3, 1, 30),
        (4, 0, 40),
        (9, 0, 20),
    ]


async def test_ddl_runs_in_its_schema(mariadb: MariaDBDatabase) -> None:
    other = f"{mariadb.name}_x"
    try:
        async with mariadb.server.connect() as conn:  # no default database
            await run_plain(conn, mysql_ddl(Ddl(other, f"CREATE DATABASE `{other}`")))
            await run_plain(conn, mysql_ddl(Ddl(other, "CREATE TABLE `5%` (id INT PRIMARY KEY)")))
        tables = await mariadb.server.query(f"SHOW TABLES IN `{other}`")
        assert tables == [("5%",)]
    finally:
        await mariadb.server.execute(f"DROP DATABASE IF EXISTS `{other}`")


async def run_plain(conn: Any, sqls: list[str]) -> None:
    async with conn.cursor() as cur:
        for sql in sqls:
            await cur.execute(sql)  # DDL goes without parameters


async def test_checkpoint_table_and_json(mariadb: MariaDBDatabase) -> None:
    where = {"schema": mariadb.name, "table": "checkpoint"}
    cluster = 2**64 - 1
    async with mariadb.connect() as conn:
        await run_plain(conn, checkpoint_setup(MYSQL, **where))
        await run_plain(conn, checkpoint_setup(MYSQL, **where))  # idempotent
        for ts in (100, 200):
            rec = CheckpointRecord(ts, schema_version=3)
            await run(conn, [checkpoint_save(MYSQL, cluster, rec.to_json(), **where)])
        load = checkpoint_load(MYSQL, cluster, **where)
        async with conn.cursor() as cur:
            await cur.execute(load.sql, load.args)
            rows = await cur.fetchall()
    assert len(rows) == 1
    assert CheckpointRecord.from_json(rows[0][0]) == CheckpointRecord(200, schema_version=3)
    [(ctype,)] = await mariadb.query(
        "SELECT column_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = 'checkpoint' AND column_name = 'clusterID'",
        (mariadb.name,),
    )
    assert ctype == "bigint(20) unsigned"


async def test_batch_and_checkpoint_commit_or_roll_back_together(mariadb: MariaDBDatabase) -> None:
    t = TableInfo.build(mariadb.name, "t", [("id", "int")], ["id"])
    where = {"schema": mariadb.name, "table": "cp"}
    await mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    async with mariadb.connect() as conn:
        await run_plain(conn, checkpoint_setup(MYSQL, **where))
        await conn.begin()
        good = insert(MYSQL, t, [{"id": i} for i in range(100)])
        save = checkpoint_save(MYSQL, 1, CheckpointRecord(50).to_json(), **where)
        with pytest.raises(asyncmy.errors.IntegrityError):
            await run(conn, [good, save, insert(MYSQL, t, [{"id": 5}])])
        await conn.rollback()
    assert await mariadb.query("SELECT COUNT(*) FROM t") == [(0,)]
    assert await mariadb.query("SELECT COUNT(*) FROM cp") == [(0,)]
