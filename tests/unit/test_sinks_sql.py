"""SQL generation for both dialects: exact text, and (SQLite) that it does what it says."""

from __future__ import annotations

import sqlite3

import pytest

from tributary.change import Ddl, Row, RowChange, SqlValue, TableInfo
from tributary.sinks.checkpoint import checkpoint_load, checkpoint_save, checkpoint_setup
from tributary.sinks.mysql.statements import mysql_ddl
from tributary.sql import (
    MYSQL,
    SQLITE,
    Statement,
    delete,
    delete_many,
    insert,
    quote,
    row_statements,
    table_name,
    update,
)

PK = TableInfo.build("shop", "acct", [("id", "int"), ("bal", "int"), ("name", "text")], ["id"])
PK2 = TableInfo.build("shop", "m", [("a", "int"), ("b", "int"), ("v", "int")], ["a", "b"])
UK = TableInfo.build("shop", "u", [("id", "int"), ("code", "text")], unique_keys={"c": ["code"]})
BARE = TableInfo.build("shop", "log", [("k", "int"), ("v", "text")])


def test_quoting_per_dialect() -> None:
    assert quote(MYSQL, "a`b") == "`a``b`"
    assert quote(MYSQL, "50%") == "`50%%`"  # drivers apply Python % formatting to the text
    assert quote(MYSQL, "50%", params=False) == "`50%`"
    assert quote(SQLITE, 'a"b%') == '"a""b%"'
    assert table_name(MYSQL, "shop", "acct") == "`shop`.`acct`"
    assert table_name(SQLITE, "shop", "acct") == '"shop__acct"'
    assert table_name(MYSQL, "", "acct") == "`acct`"


def test_multi_row_insert_and_replace() -> None:
    rows: list[Row] = [{"id": 1, "bal": 10, "name": "a"}, {"name": None, "bal": 20, "id": 2}]
    assert insert(MYSQL, PK, rows) == Statement(
        "INSERT INTO `shop`.`acct` (`id`,`bal`,`name`) VALUES (%s,%s,%s),(%s,%s,%s)",
        (1, 10, "a", 2, 20, None),
    )
    assert insert(SQLITE, PK, rows[:1], replace=True).sql == (
        'REPLACE INTO "shop__acct" ("id","bal","name") VALUES (?,?,?)'
    )
    with pytest.raises(ValueError):
        insert(MYSQL, PK, [{"id": 1}, {"id": 2, "bal": 3}])
    with pytest.raises(ValueError):
        insert(MYSQL, PK, [])


def test_update_and_delete_identify_rows_by_key() -> None:
    old: Row = {"id": 1, "bal": 10, "name": "a"}
    new: Row = {"id": 1, "bal": 11, "name": "a"}
    assert update(MYSQL, PK, old, new) == Statement(
        "UPDATE `shop`.`acct` SET `id` = %s,`bal` = %s,`name` = %s WHERE `id` = %s LIMIT 1",
        (1, 11, "a", 1),
    )
    assert update(SQLITE, PK, old, new).sql == (
        'UPDATE "shop__acct" SET "id" = ?,"bal" = ?,"name" = ? WHERE "id" = ?'
    )
    assert delete(MYSQL, UK, {"id": 1, "code": "x"}) == Statement(
        "DELETE FROM `shop`.`u` WHERE `code` = %s LIMIT 1", ("x",)
    )


def test_keyless_rows_match_all_columns_with_is_null() -> None:
    assert delete(MYSQL, BARE, {"k": 1, "v": None}) == Statement(
        "DELETE FROM `shop`.`log` WHERE `k` = %s AND `v` IS NULL LIMIT 1", (1,)
    )
    assert delete(SQLITE, UK, {"id": 1, "code": None}).sql == (
        'DELETE FROM "shop__u" WHERE rowid IN '
        '(SELECT rowid FROM "shop__u" WHERE "id" = ? AND "code" IS NULL LIMIT 1)'
    )


def test_delete_many_uses_row_values() -> None:
    assert delete_many(MYSQL, PK, [{"id": 1}, {"id": 2}]) == Statement(
        "DELETE FROM `shop`.`acct` WHERE `id` IN (%s,%s)", (1, 2)
    )
    assert delete_many(SQLITE, PK2, [{"a": 1, "b": 2}, {"a": 3, "b": 4}]) == Statement(
        'DELETE FROM "shop__m" WHERE ("a","b") IN ((?,?),(?,?))', (1, 2, 3, 4)
    )
    with pytest.raises(ValueError):
        delete_many(MYSQL, BARE, [{"k": 1}])


def test_safe_mode_turns_insert_into_replace_and_update_into_delete_replace() -> None:
    old: Row = {"id": 1, "bal": 1, "name": "a"}
    new: Row = {"id": 2, "bal": 1, "name": "a"}
    ins = row_statements(MYSQL, RowChange.insert(PK, new), safe=True)
    assert [s.sql.split()[0] for s in ins] == ["REPLACE"]
    up = row_statements(MYSQL, RowChange.update(PK, old, new), safe=True)
    assert up == [delete(MYSQL, PK, old), insert(MYSQL, PK, [new], replace=True)]
    assert row_statements(MYSQL, RowChange.update(PK, old, new)) == [update(MYSQL, PK, old, new)]
    assert row_statements(MYSQL, RowChange.delete(PK, old), safe=True) == [delete(MYSQL, PK, old)]


def test_mysql_ddl_switches_database_except_to_create_it() -> None:
    assert mysql_ddl(Ddl("shop", "CREATE TABLE t (a int)")) == [
        "USE `shop`",
        "CREATE TABLE t (a int)",
    ]
    assert mysql_ddl(Ddl("sh`op", "DROP TABLE t")) == ["USE `sh``op`", "DROP TABLE t"]
    assert mysql_ddl(Ddl("shop", "/* x */ create  schema shop")) == ["/* x */ create  schema shop"]
    assert mysql_ddl(Ddl("", "CREATE TABLE a.t (a int)")) == ["CREATE TABLE a.t (a int)"]


def test_checkpoint_statements_follow_tidb_binlog() -> None:
    assert checkpoint_setup(MYSQL) == [
        "CREATE SCHEMA IF NOT EXISTS `tidb_binlog`",
        "CREATE TABLE IF NOT EXISTS `tidb_binlog`.`checkpoint`"
        "(clusterID bigint unsigned primary key, checkPoint MEDIUMTEXT)",
    ]
    assert checkpoint_save(MYSQL, 2**64 - 1, "{}") == Statement(
        "REPLACE INTO `tidb_binlog`.`checkpoint` VALUES (%s,%s)", (2**64 - 1, "{}")
    )
    assert checkpoint_load(MYSQL, 7).sql == (
        "SELECT checkPoint FROM `tidb_binlog`.`checkpoint` WHERE clusterID = %s"
    )
    # SQLite integers are signed: uint64 IDs are stored in two's complement.
    assert checkpoint_save(SQLITE, 2**64 - 1, "{}").args == (-1, "{}")
    assert checkpoint_load(SQLITE, 2**63 - 1).args == (2**63 - 1,)


def _run(db: sqlite3.Connection, stmts: list[Statement]) -> None:
    for s in stmts:
        db.execute(s.sql, s.args)


def test_sqlite_statements_touch_exactly_one_row() -> None:
    db = sqlite3.connect(":memory:")
    db.execute('CREATE TABLE "shop__log" (k INTEGER, v TEXT)')
    db.execute('CREATE TABLE "shop__acct" (id INTEGER PRIMARY KEY, bal INTEGER, name TEXT)')
    dup: Row = {"k": 1, "v": None}
    _run(db, [insert(SQLITE, BARE, [dup, dup, {"k": 2, "v": "x"}])])
    _run(db, [update(SQLITE, BARE, dup, {"k": 1, "v": "changed"})])
    _run(db, [delete(SQLITE, BARE, {"k": 2, "v": "x"})])
    assert sorted(db.execute('SELECT k, v FROM "shop__log"').fetchall(), key=str) == [
        (1, "changed"),
        (1, None),
    ]
    row: dict[str, SqlValue] = {"id": 1, "bal": 5, "name": "a"}
    _run(db, [insert(SQLITE, PK, [row])])
    for _ in range(2):  # a replay in safe mode is harmless
        _run(db, row_statements(SQLITE, RowChange.insert(PK, row), safe=True))
        _run(db, row_statements(SQLITE, RowChange.update(PK, row, {**row, "id": 9}), safe=True))
    assert db.execute('SELECT * FROM "shop__acct"').fetchall() == [(9, 5, "a")]
    _run(db, [delete_many(SQLITE, PK, [{"id": 9}, {"id": 10}])])
    assert db.execute('SELECT count(*) FROM "shop__acct"').fetchone() == (0,)
