"""MySQL DDL translated for SQLite: the statements, and that SQLite accepts and honours them."""

from __future__ import annotations

import sqlite3

import pytest

from tributary.change import Ddl
from tributary.sinks import UnsupportedDdl
from tributary.sinks.lexer import tokenize
from tributary.sinks.sqlite.ddl import DropColumn, DropSchema, Step, translate


def tr(query: str, schema: str = "shop") -> list[Step]:
    return translate(Ddl(schema, query))


def run(db: sqlite3.Connection, query: str) -> None:
    for step in tr(query):
        assert isinstance(step, str)
        db.execute(step)


def test_lexer_unescapes_and_drops_comments() -> None:
    toks = tokenize("a /*T![clustered_index] CLUSTERED */ `b``c` 'it''s\\n' -- c\n \"q\" 1.5e3")
    assert [(t.kind, t.text) for t in toks] == [
        ("word", "a"),
        ("qident", "b`c"),
        ("string", "it's\n"),
        ("string", "q"),
        ("number", "1.5e3"),
    ]


def test_create_table_worked_example() -> None:
    assert tr(
        "CREATE TABLE t (id INT PRIMARY KEY, code VARCHAR(8) UNIQUE, price DECIMAL(10,2), "
        "KEY k (price))"
    ) == [
        'CREATE TABLE "shop__t" ("id" INTEGER, "code" TEXT, "price" TEXT, PRIMARY KEY ("id"))',
        'CREATE UNIQUE INDEX IF NOT EXISTS "shop__t__code" ON "shop__t" ("code")',
        'CREATE INDEX IF NOT EXISTS "shop__t__k" ON "shop__t" ("price")',
    ]


def test_create_table_as_tidb_prints_it() -> None:
    steps = tr(
        "CREATE TABLE IF NOT EXISTS `db2`.`o` (\n"
        "  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n"
        "  `name` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT 'a''b',\n"
        "  `ts` timestamp(3) NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),\n"
        "  `e` enum('x','y') NOT NULL, `d` double precision, `b` blob, `j` json,\n"
        "  `bits` bit(3) DEFAULT b'101', `neg` int DEFAULT -5, `f` float DEFAULT 1.5,\n"
        "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */,\n"
        "  UNIQUE KEY `uk` (`name`(10), `ts` DESC),\n"
        "  KEY (`e`), INDEX (`e`),\n"
        "  CONSTRAINT `fk` FOREIGN KEY (`e`) REFERENCES x (y) ON DELETE CASCADE\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='orders'"
    )
    assert steps == [
        'CREATE TABLE IF NOT EXISTS "db2__o" ("id" BLOB, "name" TEXT DEFAULT \'a\'\'b\', '
        '"ts" TEXT, "e" TEXT, "d" REAL, "b" BLOB, "j" TEXT, "bits" INTEGER DEFAULT 5, '
        '"neg" INTEGER DEFAULT -5, "f" REAL DEFAULT 1.5, PRIMARY KEY ("id"))',
        'CREATE UNIQUE INDEX IF NOT EXISTS "db2__o__uk" ON "db2__o" ("name", "ts")',
        'CREATE INDEX IF NOT EXISTS "db2__o__e" ON "db2__o" ("e")',
        'CREATE INDEX IF NOT EXISTS "db2__o__e_2" ON "db2__o" ("e")',
    ]


def test_translated_tables_keep_values_and_keys() -> None:
    db = sqlite3.connect(":memory:")
    run(
        db,
        "create table t (id bigint unsigned primary key, amt decimal(10,2), u varchar(3), "
        "unique (u))",
    )
    db.execute('INSERT INTO "shop__t" VALUES (?, ?, ?)', (str(2**64 - 1), "1.50", "a"))
    db.execute('INSERT INTO "shop__t" VALUES (?, ?, ?)', (7, "2.00", "b"))
    assert db.execute('SELECT id, amt FROM "shop__t" ORDER BY amt').fetchall() == [
        (str(2**64 - 1), "1.50"),  # no lossy conversion to REAL, decimal scale kept
        (7, "2.00"),
    ]
    with pytest.raises(sqlite3.IntegrityError):
        db.execute('INSERT INTO "shop__t" VALUES (8, "0", "a")')


def test_added_not_null_columns_fill_existing_rows_like_mysql() -> None:
    db = sqlite3.connect(":memory:")
    run(db, "CREATE TABLE t (id INT PRIMARY KEY)")
    db.execute('INSERT INTO "shop__t" VALUES (1)')
    run(
        db,
        "ALTER TABLE t ADD COLUMN n INT NOT NULL, ADD d DECIMAL(5,3) NOT NULL, "
        "ADD (s VARCHAR(3) NOT NULL, e ENUM('p','q') NOT NULL, dt DATETIME(2) NOT NULL), "
        "ADD x VARCHAR(2) DEFAULT 'z', ADD y INT",
    )
    assert db.execute('SELECT * FROM "shop__t"').fetchall() == [
        (1, 0, "0.000", "", "p", "0000-00-00 00:00:00.00", "z", None)
    ]


def test_alter_table_specs_in_order() -> None:
    assert tr("ALTER TABLE t ADD INDEX (c), DROP COLUMN x, RENAME TO u, ADD UNIQUE KEY uu (d)") == [
        'CREATE INDEX IF NOT EXISTS "shop__t__c" ON "shop__t" ("c")',
        DropColumn("shop__t", "x"),
        'ALTER TABLE "shop__t" RENAME TO "shop__u"',
        'CREATE UNIQUE INDEX IF NOT EXISTS "shop__u__uu" ON "shop__u" ("d")',
    ]
    assert tr("alter table t drop index k, rename column a to b") == [
        'DROP INDEX IF EXISTS "shop__t__k"',
        'ALTER TABLE "shop__t" RENAME COLUMN "a" TO "b"',
    ]


def test_other_simple_statements() -> None:
    assert tr("drop table if exists a, b.c") == [
        'DROP TABLE IF EXISTS "shop__a"',
        'DROP TABLE IF EXISTS "b__c"',
    ]
    assert tr("TRUNCATE TABLE t") == ['DELETE FROM "shop__t"']
    assert tr("truncate s2.t;") == ['DELETE FROM "s2__t"']
    assert tr("create database if not exists x charset utf8mb4") == []
    assert tr("DROP DATABASE IF EXISTS `x`") == [DropSchema("x")]
    assert tr("RENAME TABLE a TO b, x.c TO y.d") == [
        'ALTER TABLE "shop__a" RENAME TO "shop__b"',
        'ALTER TABLE "x__c" RENAME TO "y__d"',
    ]
    assert tr("CREATE UNIQUE INDEX ix ON t (a, b)") == [
        'CREATE UNIQUE INDEX IF NOT EXISTS "shop__t__ix" ON "shop__t" ("a", "b")'
    ]
    assert tr("DROP INDEX ix ON t") == ['DROP INDEX IF EXISTS "shop__t__ix"']


@pytest.mark.parametrize(
    "query",
    [
        "ALTER TABLE t MODIFY c BIGINT",
        "ALTER TABLE t ADD PRIMARY KEY (a)",
        "ALTER TABLE t ADD COLUMN c INT PRIMARY KEY",
        "ALTER TABLE t RENAME INDEX a TO b",
        "CREATE TABLE t LIKE u",
        "CREATE VIEW v AS SELECT 1",
        "CREATE TABLE t (g GEOMETRY)",
        "CREATE TABLE t (a INT, KEY ((a + 1)))",
        "CREATE TABLE t (a INT",
        "DROP TABLE t garbage",
    ],
)
def test_unsupported_ddl_names_the_query(query: str) -> None:
    with pytest.raises(UnsupportedDdl) as e:
        tr(query)
    assert query in str(e.value) and not e.value.retriable
