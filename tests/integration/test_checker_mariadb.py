"""The checker against a real MariaDB: versus the SQLite sink's file and versus MariaDB.

The SQLite downstreams are written by the real ``SqliteSink`` from row values formatted the
way the drainer formats them (``change.model``: DECIMAL and temporal values as MySQL literal
text, float32 for FLOAT, bytes for binary strings), so "equal" here means the checker's
canonical form makes MariaDB's driver values and the sink's stored values meet.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
import struct
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.checker import DiffKind, Presence, Report, RowDiff, compare
from tributary.sinks.sqlite.sink import SqliteSink
from tributary.sql import sqlite_name

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]


def f32(x: float) -> float:
    result: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return result


TYPES_DDL = """CREATE TABLE types (
  id INT PRIMARY KEY,
  i8 TINYINT, u8 TINYINT UNSIGNED, i64 BIGINT, u64 BIGINT UNSIGNED,
  dec1 DECIMAL(10,2), dec0 DECIMAL(30,0), f FLOAT, d DOUBLE,
  c CHAR(5), vc VARCHAR(20), tx TEXT, bl BLOB, bn BINARY(4), vb VARBINARY(8),
  dt DATE, dtm DATETIME(3), ts TIMESTAMP(6) NULL DEFAULT NULL, tm TIME(2), yr YEAR,
  e ENUM('a','b','c'), s SET('x','y','z'), b BIT(10), j JSON
)"""
TYPE_COLUMNS = [
    ("id", "int"), ("i8", "tinyint"), ("u8", "tinyint unsigned"), ("i64", "bigint"),
    ("u64", "bigint unsigned"), ("dec1", "decimal(10,2)"), ("dec0", "decimal(30,0)"),
    ("f", "float"), ("d", "double"), ("c", "char(5)"), ("vc", "varchar(20)"), ("tx", "text"),
    ("bl", "blob"), ("bn", "binary(4)"), ("vb", "varbinary(8)"), ("dt", "date"),
    ("dtm", "datetime(3)"), ("ts", "timestamp(6)"), ("tm", "time(2)"), ("yr", "year"),
    ("e", "enum('a','b','c')"), ("s", "set('x','y','z')"), ("b", "bit(10)"), ("j", "json"),
]  # fmt: skip
NAMES = [n for n, _ in TYPE_COLUMNS]
# (what is inserted into MariaDB, what the drainer hands the SQLite sink for the same row)
TYPE_ROWS: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = [
    (
        (1, -128, 255, -(2**63), 2**64 - 1, Decimal("-12345678.90"),
         Decimal("123456789012345678901234567890"), 3.14159, 2.718281828459045, "ab",
         "héllo ✓", "some text", b"\x00\x01\xff", b"ab", b"\x00\xff", "2024-02-29",
         "2024-02-29 10:11:12.345", "2024-02-29 10:11:12.123456", "-01:02:03.45", 2024, "b",
         "z,x", 5, '{"b": [1, 2.5], "a": null}'),
        (1, -128, 255, -(2**63), 2**64 - 1, "-12345678.90", "123456789012345678901234567890",
         f32(3.14159), 2.718281828459045, "ab", "héllo ✓", "some text", b"\x00\x01\xff",
         b"ab\x00\x00", b"\x00\xff", "2024-02-29", "2024-02-29 10:11:12.345",
         "2024-02-29 10:11:12.123456", "-01:02:03.45", 2024, "b", "x,z", 5,
         '{"a": null, "b": [1, 2.5]}'),
    ),
    ((2, *[None] * 23), (2, *[None] * 23)),
    (
        (3, 0, 0, 0, 0, Decimal("0.00"), Decimal("-1"), 1e-10, 1e300, "", "", "", b"", b"",
         b"", "0000-00-00", "0000-00-00 00:00:00.000", "1970-01-01 00:00:01", "838:59:59", 0,
         "a", "", 0, "null"),
        (3, 0, 0, 0, 0, "0.00", "-1", f32(1e-10), 1e300, "", "", "", b"", b"\x00" * 4, b"",
         "0000-00-00", "0000-00-00 00:00:00.000", "1970-01-01 00:00:01.000000", "838:59:59.00",
         0, "a", "", 0, "null"),
    ),
]  # fmt: skip
# One changed value per column in the SQLite copy of row 1 (row 3 for vc: '' -> NULL).
ALTERED: dict[str, tuple[int, Any]] = {
    "i8": (1, -127), "u8": (1, 254), "i64": (1, -(2**63) + 1), "u64": (1, str(2**64 - 2)),
    "dec1": (1, "-12345678.91"), "dec0": (1, "123456789012345678901234567891"),
    "f": (1, f32(3.1416)), "d": (1, math.nextafter(2.718281828459045, 3.0)), "c": (1, "ac"),
    "vc": (3, None), "tx": (1, "some text "), "bl": (1, b"\x00\x01\xfe"),
    "bn": (1, b"ab\x00\x01"), "vb": (1, b"\x00"), "dt": (1, "2024-02-28"),
    "dtm": (1, "2024-02-29 10:11:12.346"), "ts": (1, "2024-02-29 10:11:12.123457"),
    "tm": (1, "-01:02:03.46"), "yr": (1, 2025), "e": (1, "c"), "s": (1, "x,y,z"), "b": (1, 6),
    "j": (1, '{"a": null, "b": [1, 2.6]}'),
}  # fmt: skip

ITEMS_DDL = "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(8,2))"
ITEMS = [("id", "int"), ("name", "varchar(20)"), ("price", "decimal(8,2)")]


def item(i: int) -> tuple[Any, ...]:
    return (i, f"item {i}", f"{i}.{i % 100:02d}")


_ts = itertools.count(1)


async def sink_tables(
    path: Path, schema: str, tables: Sequence[tuple[str, list[tuple[str, str]], str, list[Any]]]
) -> None:
    """Create ``tables`` (name, columns, DDL, rows) in the SQLite file through the sink."""
    async with await SqliteSink.open(path, cluster_id=1) as sink:
        for name, columns, ddl, rows in tables:
            info = TableInfo.build(schema, name, columns, [columns[0][0]])
            names = [c for c, _ in columns]
            changes = tuple(RowChange.insert(info, dict(zip(names, r, strict=True))) for r in rows)
            await sink.apply([Txn(next(_ts), ddl=Ddl(schema, ddl, name))])
            if changes:
                await sink.apply([Txn(next(_ts), rows=changes)])


async def mariadb_rows(db: MariaDBDatabase, table: str, rows: Sequence[Sequence[Any]]) -> None:
    if not rows:
        return
    marks = ",".join(["%s"] * len(rows[0]))
    async with db.connect(binary_prefix=True) as conn, conn.cursor() as cur:
        await cur.executemany(f"INSERT INTO `{table}` VALUES ({marks})", [tuple(r) for r in rows])


def sqlite_exec(path: Path, sql: str, args: Sequence[Any] = ()) -> None:
    """Change the SQLite file behind the sink's back (values bound as the sink binds them)."""
    bound = tuple(str(a) if isinstance(a, int) and a >= 2**63 else a for a in args)
    with sqlite3.connect(path) as conn:
        conn.execute(sql, bound)
    conn.close()


def only(report: Report) -> dict[str, Any]:
    return {t.table.split(".", 1)[1]: t for t in report.tables}


@pytest.fixture
async def types_pair(mariadb: MariaDBDatabase, tmp_path: Path) -> AsyncIterator[Path]:
    """The types table in MariaDB and, through the SQLite sink, in a SQLite file."""
    await mariadb.execute(TYPES_DDL)
    await mariadb_rows(mariadb, "types", [up for up, _ in TYPE_ROWS])
    path = tmp_path / "down.db"
    await sink_tables(
        path, mariadb.name, [("types", TYPE_COLUMNS, TYPES_DDL, [d for _, d in TYPE_ROWS])]
    )
    yield path


async def test_many_types_equal_mariadb_vs_sqlite_sink(
    mariadb: MariaDBDatabase, types_pair: Path
) -> None:
    report = await compare(mariadb.dsn(), f"sqlite://{types_pair}", chunk_size=2)
    assert report.equal, report.render_text()
    (t,) = report.tables  # the sink's tidb_binlog__checkpoint table is not compared
    assert t.table == f"{mariadb.name}.types" and t.key == ("id",) and t.checksum == "python"
    assert (t.chunks, t.chunks_differing, t.rows_upstream, t.rows_downstream) == (2, 0, 3, 3)


async def test_each_changed_type_is_reported_on_its_column(
    mariadb: MariaDBDatabase, types_pair: Path
) -> None:
    table = sqlite_name(mariadb.name, "types")
    for column, (row_id, value) in ALTERED.items():
        old = TYPE_ROWS[row_id - 1][1][NAMES.index(column)]
        sqlite_exec(
            types_pair, f'UPDATE "{table}" SET "{column}" = ? WHERE id = ?', (value, row_id)
        )
        report = await compare(mariadb.dsn(), f"sqlite://{types_pair}")
        sqlite_exec(types_pair, f'UPDATE "{table}" SET "{column}" = ? WHERE id = ?', (old, row_id))
        (t,) = report.tables
        assert (t.different, t.missing, t.extra) == (1, 0, 0), column
        (d,) = t.diffs
        assert d.key == (("id", row_id),) and d.columns == (column,), column
    assert (await compare(mariadb.dsn(), f"sqlite://{types_pair}")).equal


async def test_differences_across_chunks_mariadb_vs_sqlite(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    for name in ("items", "gone"):
        await mariadb.execute(ITEMS_DDL.replace("items", name))
    await mariadb_rows(mariadb, "items", [item(i) for i in range(1, 21)])
    path = tmp_path / "down.db"
    ghost_ddl = ITEMS_DDL.replace("items", "ghost")
    await sink_tables(
        path,
        mariadb.name,
        [
            ("items", ITEMS, ITEMS_DDL, [item(i) for i in range(1, 21)]),
            ("ghost", ITEMS, ghost_ddl, []),
        ],
    )
    items = sqlite_name(mariadb.name, "items")
    sqlite_exec(path, f'UPDATE "{items}" SET price = ? WHERE id = 7', ("7.08",))
    sqlite_exec(path, f'DELETE FROM "{items}" WHERE id = 12')
    sqlite_exec(path, f'INSERT INTO "{items}" VALUES (25, ?, ?)', ("item 25", "25.25"))
    sqlite_exec(path, f'INSERT INTO "{items}" VALUES (0, ?, ?)', ("item 0", "0.00"))

    report = await compare(mariadb.dsn(), f"sqlite://{path}", chunk_size=3)
    assert not report.equal
    tables = only(report)
    assert tables["gone"].presence is Presence.UPSTREAM_ONLY
    assert tables["ghost"].presence is Presence.DOWNSTREAM_ONLY
    t = tables["items"]
    # 20 upstream rows in pages of 3: boundaries 3, 6, ..., 18 -> 7 chunks. Row 0 falls in the
    # open first chunk, 7 in the third, 12 in the fourth, 25 in the open last one.
    assert (t.chunks, t.chunks_differing) == (7, 4)
    assert (t.rows_upstream, t.rows_downstream) == (20, 21)
    assert t.diffs == [
        RowDiff(DiffKind.EXTRA, (("id", 0),)),
        RowDiff(DiffKind.DIFFERENT, (("id", 7),), ("price",), ("7.07",), ("7.08",)),
        RowDiff(DiffKind.MISSING, (("id", 12),)),
        RowDiff(DiffKind.EXTRA, (("id", 25),)),
    ]
    only_items = await compare(mariadb.dsn(), f"sqlite://{path}", tables=[f"{mariadb.name}.items"])
    assert [x.table for x in only_items.tables] == [f"{mariadb.name}.items"]
    rest = await compare(mariadb.dsn(), f"sqlite://{path}", exclude=["~items$", "~gone"])
    assert [x.table for x in rest.tables] == [f"{mariadb.name}.ghost"]


KEYED: list[tuple[str, list[tuple[str, str]], str, list[tuple[Any, ...]]]] = [
    ("deckey", [("k", "decimal(8,2)"), ("v", "int")],
     "CREATE TABLE deckey (k DECIMAL(8,2) PRIMARY KEY, v INT)",
     [(Decimal(k), i) for i, k in enumerate(
         ["-100.50", "-9.99", "-2.25", "-0.01", "0.00", "0.10", "9.99", "10.00", "99.99",
          "100.01"])]),
    ("timekey", [("k", "time(1)"), ("v", "int")],
     "CREATE TABLE timekey (k TIME(1) PRIMARY KEY, v INT)",
     [(k, i) for i, k in enumerate(
         ["-100:00:00.0", "-10:00:00.0", "-01:00:00.5", "00:00:00.0", "00:00:09.9", "01:00:00.0",
          "09:59:59.9", "10:00:00.0", "99:00:00.0", "100:00:00.0"])]),
    ("ukey", [("k", "bigint unsigned"), ("v", "int")],
     "CREATE TABLE ukey (k BIGINT UNSIGNED PRIMARY KEY, v INT)",
     [(k, i) for i, k in enumerate(
         [0, 9, 10, 2**63 - 1, 2**63, 9 * 10**18 + 5, 10**19, 10**19 + 1, 2**64 - 2, 2**64 - 1])]),
    ("textkey", [("k", "varchar(10)"), ("n", "int"), ("v", "int")],
     "CREATE TABLE textkey (k VARCHAR(10), n INT, v INT, PRIMARY KEY (k, n))",
     [(k, n, i) for i, (k, n) in enumerate(
         [("A", 1), ("A", 2), ("B", 1), ("a", -5), ("a", 10), ("b", 0), ("é", 1), ("z", 3),
          ("zz", 1), ("✓", 2)])]),
    ("datekey", [("k", "datetime(3)"), ("v", "int")],
     "CREATE TABLE datekey (k DATETIME(3) PRIMARY KEY, v INT)",
     [(f"20{y:02d}-0{m}-01 00:00:00.{ms:03d}", i) for i, (y, m, ms) in enumerate(
         [(0, 1, 0), (1, 2, 5), (1, 2, 50), (9, 9, 0), (10, 1, 0), (99, 1, 999)])]),
]  # fmt: skip


async def test_key_order_agrees_between_mariadb_and_sqlite(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """Keys whose stored SQLite form does not sort like MariaDB's values (DECIMAL and TIME text,
    unsigned values past 2^63, utf8mb4_bin text) still cut both sides into the same chunks:
    equal data gives no differing chunk, one changed row exactly one."""
    sink_rows = []
    for name, columns, ddl, rows in KEYED:
        await mariadb.execute(ddl)
        await mariadb_rows(mariadb, name, rows)
        sink_rows.append((name, columns, ddl, [tuple(map(_sink_value, r)) for r in rows]))
    path = tmp_path / "down.db"
    await sink_tables(path, mariadb.name, sink_rows)

    report = await compare(mariadb.dsn(), f"sqlite://{path}", chunk_size=2)
    assert report.equal, report.render_text()
    for t in report.tables:
        assert t.chunks >= 3 and t.chunks_differing == 0, t.table
        assert not t.notes, t.table

    for name, *_ in KEYED:
        sqlite_exec(path, f'UPDATE "{sqlite_name(mariadb.name, name)}" SET v = v + 100 WHERE v = 4')
    report = await compare(mariadb.dsn(), f"sqlite://{path}", chunk_size=2)
    for t in report.tables:
        assert (t.chunks_differing, t.different, t.missing, t.extra) == (1, 1, 0, 0), t.table
        assert t.diffs[0].columns == ("v",)


def _sink_value(v: Any) -> Any:
    return format(v, "f") if isinstance(v, Decimal) else v


async def test_tables_without_primary_key(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    await mariadb.execute("CREATE TABLE logs (a INT, b VARCHAR(5))")
    await mariadb.execute(
        "CREATE TABLE uk (a INT NOT NULL, b INT, c INT, UNIQUE KEY ua (a), UNIQUE KEY ub (b))"
    )
    await mariadb_rows(mariadb, "logs", [(1, "x"), (1, "x"), (1, "x"), (2, None), (3, "")])
    await mariadb_rows(mariadb, "uk", [(i, i, i) for i in range(10)])
    path = tmp_path / "down.db"
    sqlite_exec(path, f'CREATE TABLE "{sqlite_name(mariadb.name, "logs")}" (a INTEGER, b TEXT)')
    sqlite_exec(
        path, f'CREATE TABLE "{sqlite_name(mariadb.name, "uk")}" (a INTEGER, b INTEGER, c INTEGER)'
    )
    logs_table, uk_table = sqlite_name(mariadb.name, "logs"), sqlite_name(mariadb.name, "uk")
    for log_row in [(1, "x"), (2, None), (3, None), (3, ""), (1, "x")]:
        sqlite_exec(path, f'INSERT INTO "{logs_table}" VALUES (?, ?)', log_row)
    for i in range(10):  # the downstream lost the unique index; row 6 differs in c
        sqlite_exec(path, f'INSERT INTO "{uk_table}" VALUES (?, ?, ?)', (i, i, 99 if i == 6 else i))

    report = await compare(mariadb.dsn(), f"sqlite://{path}", chunk_size=3)
    tables = only(report)
    logs = tables["logs"]
    assert (logs.key_kind, logs.chunks) == ("all columns", 1)
    assert logs.diffs == [
        RowDiff(DiffKind.MISSING, (("a", 1), ("b", "x"))),  # three copies up, two down
        RowDiff(DiffKind.EXTRA, (("a", 3), ("b", None))),  # NULL is not ''
    ]
    uk = tables["uk"]  # the NOT NULL unique key identifies rows (b is nullable)
    assert (uk.key, uk.key_kind, uk.chunks, uk.chunks_differing) == (("a",), "unique key", 4, 1)
    assert uk.diffs == [RowDiff(DiffKind.DIFFERENT, (("a", 6),), ("c",), (6,), (99,))]


async def test_mariadb_vs_mariadb_with_pushed_down_checksums(mariadb: MariaDBDatabase) -> None:
    """Database A against database B of the same server (``mysql://.../A`` vs ``.../B``)."""
    other = f"{mariadb.name}_down"
    server = mariadb.server
    server.admin(f"CREATE DATABASE `{other}`")
    try:
        ci = "CREATE TABLE names (k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)"
        for db in (mariadb.name, other):
            for ddl in (TYPES_DDL, ITEMS_DDL, ci):
                await server.execute(ddl, database=db)
        await mariadb_rows(mariadb, "types", [up for up, _ in TYPE_ROWS])
        await mariadb_rows(mariadb, "items", [item(i) for i in range(1, 31)])
        await mariadb_rows(mariadb, "names", [(k, i) for i, k in enumerate("aBcDeFgHiJ")])
        async with server.connect(other, binary_prefix=True) as conn, conn.cursor() as cur:
            marks = ",".join(["%s"] * len(NAMES))
            await cur.executemany(f"INSERT INTO types VALUES ({marks})", [u for u, _ in TYPE_ROWS])
            await cur.executemany(
                "INSERT INTO items VALUES (%s,%s,%s)", [item(i) for i in range(1, 31) if i != 17]
            )
            await cur.execute("UPDATE items SET name = 'renamed' WHERE id = 29")
            await cur.execute("INSERT INTO items VALUES (31, 'new', '0.31')")
            await cur.executemany(
                "INSERT INTO names VALUES (%s,%s)", [(k, i) for i, k in enumerate("aBcDeFgHiJ")]
            )
        down = server.dsn(other)

        report = await compare(mariadb.dsn(), down, chunk_size=4)
        tables = only(report)
        assert tables["types"].equal and tables["names"].equal
        assert tables["names"].chunks == 3  # the _ci key chunks: both sides order it alike
        t = tables["items"]
        assert t.table == f"{mariadb.name}.items" and t.downstream_table == f"{other}.items"
        assert (t.chunks, t.chunks_differing, t.checksum) == (8, 2, "sql")
        assert t.diffs == [
            RowDiff(DiffKind.MISSING, (("id", 17),)),
            RowDiff(DiffKind.DIFFERENT, (("id", 29),), ("name",), ("item 29",), ("renamed",)),
            RowDiff(DiffKind.EXTRA, (("id", 31),)),
        ]
        await server.execute("DROP TABLE names", database=other)
        await server.execute("ALTER TABLE types ADD COLUMN extra INT", database=other)
        report = await compare(mariadb.dsn(), down, tables=["~types|names"])
        tables = only(report)
        assert tables["names"].presence is Presence.UPSTREAM_ONLY
        assert tables["types"].columns_only_downstream == ("extra",)
        assert tables["types"].rows_equal and not tables["types"].equal
    finally:
        server.admin(f"DROP DATABASE IF EXISTS `{other}`")
