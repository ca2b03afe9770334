"""Catch-up through real Spark (local mode) into a real MariaDB, SQLite and a Parquet lake.

The reference is the streaming path: the same transactions applied one batch at a time by the
MySQL sink (consistent mode) or the SQLite sink, as the drainer does. Spark's result must equal
it table for table, and a rerun of the same range must change nothing.
"""

from __future__ import annotations

import io
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from services.spark.catchup import run_catchup
from services.spark.lake_manifest import MANIFEST, Manifest
from services.spark.progress import Progress
from tests.support.job_progress import Recorded
from tests.support.spark_data import ddls, workload
from tributary.change import RowChange, SqlValue, TableInfo, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink
from tributary.staging import StagingWriter, read_range
from tributary.wire.ts import compose

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.support.mariadb import MariaDBServer

pytest_plugins = ["tests.support.mariadb", "tests.support.spark"]
pytestmark = [pytest.mark.timeout(600)]

SEED_TXNS, RANGE_TXNS = 40, 300
DAY = 86_400_000  # ms


def stage(directory: Path, txns: Sequence[Txn], start_ts: int) -> None:
    writer = StagingWriter(directory, start_ts, flush_rows=500)  # several files per table
    for t in txns:
        writer.add(t)
    writer.close()


def staged_rows(directory: Path) -> int:
    """The job's progress total: staged rows (a key-changing update stages two)."""
    return sum(t.rows for t in read_range(directory).tables)


async def stream(url: str, txns: Sequence[Txn], cluster_id: int = 7) -> None:
    async with open_sink(url, SinkOptions(cluster_id=cluster_id)) as sink:
        for i in range(0, len(txns), 25):
            await sink.apply(txns[i : i + 25])


async def mysql_rows(server: MariaDBServer, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    return {
        t: await server.query(f"SELECT * FROM `{schema}`.`{t}` ORDER BY 1, 2")
        for t in ("items", "pairs")
    }


@pytest.fixture
async def schemas(mariadb_server: MariaDBServer) -> AsyncIterator[tuple[str, str]]:
    names = ("spark_cu", "stream_cu")
    for n in names:
        await mariadb_server.execute(f"DROP DATABASE IF EXISTS {n}")
    yield names
    for n in names:
        await mariadb_server.execute(f"DROP DATABASE IF EXISTS {n}")


async def test_catchup_into_mariadb_equals_streaming_and_rerun_converges(
    spark: SparkSession, mariadb_server: MariaDBServer, schemas: tuple[str, str], tmp_path: Path
) -> None:
    url = mariadb_server.dsn() + "?consistent=true"
    by_spark, by_stream = schemas
    for i, schema in enumerate(schemas):  # both start from the same downstream state
        await stream(url, ddls(schema, 100) + workload(schema, 1000, SEED_TXNS, seed=1), i)
    start = 1000 + 10 * (SEED_TXNS - 1)
    # the range continues the seed history: updates and deletes hit rows that exist
    full = {s: workload(s, 1000, SEED_TXNS + RANGE_TXNS, seed=1)[SEED_TXNS:] for s in schemas}
    await stream(url, full[by_stream], 1)
    stage(tmp_path / "range", full[by_spark], start)

    seen = Recorded("catch-up")
    summary = run_catchup(spark, tmp_path / "range", url, seen.progress)
    seen.assert_reached(staged_rows(tmp_path / "range"))
    expected = await mysql_rows(mariadb_server, by_stream)
    assert await mysql_rows(mariadb_server, by_spark) == expected
    assert summary["deletes"] > 0 and summary["upserts"] > 0
    assert summary["row_changes"] > summary["upserts"] + summary["deletes"]  # compaction worked

    run_catchup(spark, tmp_path / "range", url, Progress(io.StringIO()))
    assert await mysql_rows(mariadb_server, by_spark) == expected
    leftovers = await mariadb_server.query(
        "SELECT table_name FROM information_schema.tables WHERE table_name LIKE '_tributary_cu_%'"
    )
    assert leftovers == []


def sqlite_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as conn:
        return {
            t: conn.execute(f'SELECT * FROM "db__{t}" ORDER BY 1, 2').fetchall()
            for t in ("items", "pairs")
        }


async def test_catchup_into_sqlite_equals_streaming(spark: SparkSession, tmp_path: Path) -> None:
    spark_db, stream_db = tmp_path / "spark.db", tmp_path / "stream.db"
    history = ddls("db", 100) + workload("db", 1000, SEED_TXNS + RANGE_TXNS, seed=2)
    cut = 3 + SEED_TXNS
    await stream(f"sqlite://{spark_db}", history[:cut])
    await stream(f"sqlite://{stream_db}", history)
    stage(tmp_path / "range", history[cut:], history[cut - 1].commit_ts)

    seen = Recorded("catch-up")
    run_catchup(spark, tmp_path / "range", f"sqlite://{spark_db}", seen.progress)
    seen.assert_reached(staged_rows(tmp_path / "range"))
    got, want = sqlite_rows(spark_db), sqlite_rows(stream_db)
    for t in want:
        diff = [(a, b) for a, b in zip(got[t], want[t], strict=False) if a != b][:2]
        assert got[t] == want[t], (len(got[t]), len(want[t]), diff)


def test_lake_ranges_manifest_and_rerun(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    noon = compose(1_709_640_000_000, 0)  # 2024-03-05 12:00 UTC
    history = workload("db", noon, 100, seed=3) + workload("db", noon + (DAY << 18), 100, seed=4)
    first, second = history[:120], history[120:]
    stage(tmp_path / "r1", first, 1)
    stage(tmp_path / "r2", second, first[-1].commit_ts)
    seen = Recorded("catch-up")
    run_catchup(spark, tmp_path / "r1", f"parquet://{lake}", seen.progress)
    seen.assert_reached(staged_rows(tmp_path / "r1"))  # two tables: one done, then both
    progress = Progress(io.StringIO())
    run_catchup(spark, tmp_path / "r2", f"parquet://{lake}", progress)
    manifest = Manifest.from_json((lake / MANIFEST).read_text())
    assert manifest.complete_ts == second[-1].commit_ts
    assert [(r.start_ts, r.end_ts) for r in manifest.ranges] == [
        (1, first[-1].commit_ts),
        (first[-1].commit_ts, second[-1].commit_ts),
    ]
    for r in manifest.ranges:
        for f in r.files:
            assert f.table in ("db.items", "db.pairs")
            assert f.commit_date in ("2024-03-05", "2024-03-06")
            assert r.start_ts < f.min_commit_ts <= f.max_commit_ts <= r.end_ts
            assert pq.read_metadata(lake / f.path).num_rows == f.rows
    # the second range holds each touched key once, with its last change
    keys = [
        row["id"]
        for f in manifest.ranges[1].files
        if f.table == "db.items"
        for row in pq.read_table(lake / f.path).to_pylist()
    ]
    assert len(keys) == len(set(keys)) > 0
    assert {f.commit_date for f in manifest.ranges[0].files} == {"2024-03-05", "2024-03-06"}
    before = sorted(p.name for p in lake.rglob("*.parquet"))
    run_catchup(spark, tmp_path / "r2", f"parquet://{lake}", progress)  # a rerun replaces
    assert sorted(p.name for p in lake.rglob("*.parquet")) == before
    assert Manifest.from_json((lake / MANIFEST).read_text()) == manifest


TRICKY = ["NULL", "", "a,b", '"q" and ""', "line\nbreak\r\n", "back\\slash\\N", "  pad  ", "é€😀"]


async def test_catchup_loads_awkward_values_exactly(
    spark: SparkSession, mariadb_server: MariaDBServer, schemas: tuple[str, str], tmp_path: Path
) -> None:
    """The CSV + LOAD DATA path keeps every value: text that looks like NULL or holds quotes,
    separators, newlines, backslashes; NULL; binary with zero bytes; and a key deleted."""
    schema = schemas[0]
    t = TableInfo.build(
        schema,
        "odd",
        [("id", "bigint"), ("s", "varchar(40)"), ("b", "varbinary(8)"), ("f", "double")],
        ["id"],
    )
    await mariadb_server.execute(f"CREATE DATABASE {schema}")
    await mariadb_server.execute(
        f"CREATE TABLE {schema}.odd (id BIGINT PRIMARY KEY, s VARCHAR(40) NULL, "
        "b VARBINARY(8) NULL, f DOUBLE NULL)"
    )
    await mariadb_server.execute(f"INSERT INTO {schema}.odd VALUES (100, 'old', NULL, 1)")
    rows: list[dict[str, SqlValue]] = [
        {"id": i, "s": s, "b": bytes([0, i, 10, 34]), "f": i / 3} for i, s in enumerate(TRICKY)
    ]
    rows.append({"id": 50, "s": None, "b": None, "f": None})
    rows.append({"id": 51, "s": "x", "b": b"", "f": -1.5e300})
    txns = [Txn(10, 9, rows=tuple(RowChange.insert(t, r) for r in rows))]
    old: dict[str, SqlValue] = {"id": 100, "s": "old", "b": None, "f": 1.0}
    txns.append(Txn(20, 19, rows=(RowChange.delete(t, old),)))
    stage(tmp_path / "range", txns, 1)

    summary = run_catchup(spark, tmp_path / "range", mariadb_server.dsn(), Progress(io.StringIO()))
    got = await mariadb_server.query(f"SELECT id, s, b, f FROM {schema}.odd ORDER BY id")
    assert got == [(r["id"], r["s"], r["b"], r["f"]) for r in rows]
    assert (summary["upserts"], summary["deletes"]) == (len(rows), 1)
