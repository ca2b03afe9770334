"""Bulk load split by primary-key ranges for every kind of key, through real Spark from a real
MariaDB: composite (int, varchar), case-insensitive strings (NO PAD with values differing only
by trailing spaces; PAD SPACE with a tab, which sorts before the pad), DATETIME(6),
TIMESTAMP(3) in a session zone other than the server's, VARBINARY with quote, backslash and
zero bytes, and DECIMAL.

Each table is read as 4 non-empty partitions whose sizes add up to the row count (a row read
twice or lost changes the sum, unless both happen, which the comparison then shows), the
ranges are planned as range scans of the primary key, and the loaded downstream equals the
upstream (checker)."""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from services.spark.bulkload import bulk_load, read_predicates, snapshot
from services.spark.jdbc import JdbcSession, MysqlEndpoint
from services.spark.progress import Progress
from tributary.checker import compare

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.support.mariadb import MariaDBPair, MariaDBServer

pytest_plugins = ["tests.support.mariadb", "tests.support.spark"]
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

ZONE = "?time-zone=%2B05:00"  # the jobs' sessions in +05:00, the servers' default is +00:00
PARTITIONS = 4
N = 300


def _names(i: int) -> str:
    """Distinct under a case-insensitive collation, in an order unlike the binary one."""
    first = "aBcDéFgHiJ"[i % 10]
    return f"{first.upper() if i % 3 else first}{i:03d}"


def _rows() -> dict[str, tuple[str, list[tuple[Any, ...]]]]:
    rnd = random.Random(6)
    binary = {b"", b"\x00", b"\x00\x00", b"'", b"\\", b"'\\\x00", b"\xff" * 12}
    while len(binary) < N:
        binary.add(rnd.randbytes(rnd.randint(1, 12)))
    start = datetime(2024, 3, 31, 0, 0, 0)
    return {
        "comp": (
            "v INT NOT NULL, b VARCHAR(24) NOT NULL, a INT NOT NULL, PRIMARY KEY (a, b)",
            [(i, f"O'k\\{i}" if i % 5 == 0 else _names(i), i % 7) for i in range(N)],
        ),
        "ci_nopad": (
            "k VARCHAR(24) COLLATE utf8mb4_general_nopad_ci PRIMARY KEY, v INT",
            [(_names(i) + " " * s, i * 3 + s) for i in range(N // 3) for s in range(3)],
        ),
        "ci_pad": (
            "k VARCHAR(24) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT",
            [(_names(i) + tail, i) for i in range(N // 3) for tail in ("", "\t", "!")],
        ),
        "dt": (
            "ts DATETIME(6) PRIMARY KEY, v INT",
            [(start + timedelta(minutes=37 * i, microseconds=i), i) for i in range(N)],
        ),
        "ts": (
            "ts TIMESTAMP(3) PRIMARY KEY, v INT",
            [(start + timedelta(minutes=59 * i, milliseconds=i), i) for i in range(N)],
        ),
        "bin": (
            "k VARBINARY(12) PRIMARY KEY, v INT",
            [(k, i) for i, k in enumerate(sorted(binary))],
        ),
        "decimal_key": (
            "k DECIMAL(10, 3) PRIMARY KEY, v INT",
            [(Decimal(i * 7 - 1000) / 8, i) for i in range(N)],
        ),
    }


async def _load(up: MariaDBServer, down: MariaDBServer) -> list[str]:
    tables = _rows()
    for server in (up, down):
        await server.execute("CREATE DATABASE splits")
        for name, (ddl, _) in tables.items():
            await server.execute(f"CREATE TABLE splits.{name} ({ddl})")
    async with up.connect("splits") as conn, conn.cursor() as cur:
        await cur.execute("SET time_zone = '+05:00'")
        for name, (_, rows) in tables.items():
            marks = ", ".join(["%s"] * len(rows[0]))
            await cur.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
        await conn.commit()
    return list(tables)


def _partition_sizes(spark: SparkSession, source: MysqlEndpoint, table: str) -> list[int]:
    _, df, position = snapshot(spark, source, "splits", table, PARTITIONS)
    try:
        sizes: list[int] = df.rdd.glom().map(len).collect()
    finally:
        df.unpersist()
    assert sum(sizes) == position.rows
    return sizes


def _plans(spark: SparkSession, source: MysqlEndpoint, table: str) -> list[tuple[str, str]]:
    """(access type, index) of each range's read as EXPLAIN gives them."""
    with JdbcSession(spark, source) as s:
        where, _ = read_predicates(s, "splits", table, PARTITIONS)
        plans: list[Sequence[str | None]] = [
            s.query(f"EXPLAIN SELECT * FROM splits.{table} WHERE {w}")[0] for w in where
        ]
    return [(str(p[3]), str(p[5])) for p in plans]  # columns: id, select_type, table, type, ..


async def test_every_key_kind_is_read_in_ranges_and_loaded_equal(
    spark: SparkSession, mariadb_pair: MariaDBPair
) -> None:
    up, down = mariadb_pair.upstream, mariadb_pair.downstream
    source = MysqlEndpoint.from_url(up.dsn() + ZONE)
    tables = await _load(up, down)
    for table in tables:
        sizes = await asyncio.to_thread(_partition_sizes, spark, source, table)
        assert len(sizes) == PARTITIONS and min(sizes) > 0, (table, sizes)
        assert sum(sizes) == N, (table, sizes)
        position = await asyncio.to_thread(
            bulk_load,
            spark,
            source,
            "splits",
            table,
            down.dsn() + ZONE,
            Progress(io.StringIO()),
            partitions=PARTITIONS,
        )
        assert position.rows == N
    for table in ("comp", "ci_pad", "bin"):
        plans = await asyncio.to_thread(_plans, spark, source, table)
        assert plans == [("range", "PRIMARY")] * PARTITIONS, (table, plans)
    report = await compare(up.dsn("splits"), down.dsn("splits"))
    assert report.equal, report.render_text()
