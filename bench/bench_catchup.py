"""Catch-up of a backlog: streaming (the MySQL sink, consistent mode, as the drainer applies)
against the Spark job (staging + compaction + JDBC merge), same run, same MariaDB.

Backlog: ``--rows`` row changes (default 1M) on a sysbench-like table (``id`` primary key,
``k`` indexed, ``c`` and ``pad`` strings), in transactions of 1-10 rows; 70 % inserts of new
keys, 30 % updates of earlier keys. Both paths start from an empty table in their own schema.

* streaming: batches of 960 row changes (the drainer's default batch) through ``sinks.mysql``
  consistent mode: each batch compacted and committed with the checkpoint.
* Spark: the drainer-side staging write (``staging.StagingWriter``) plus the job as
  ``python -m services.spark.catchup`` would run it, Spark session start-up included (the
  compacted rows go as CSV files through ``LOAD DATA LOCAL INFILE``).

The downstream has a 1 GB buffer pool (``DOWNSTREAM_ARGS``), as a server holding these tables
would: with the test servers' 128 MB the streaming baseline is slowed by page reads.

Both tables are checked equal (row count and CHECKSUM TABLE) before the figures are printed as
one JSON line (``catchup``) with both rates and the ratio (target: Spark >= 5x streaming).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.spark.catchup import run_catchup
from services.spark.progress import Progress
from services.spark.session import spark_session
from tests.support.mariadb import BENCH_ARGS, MariaDBServer, make_template, running_server
from tributary.change import RowChange, SqlValue, TableInfo, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink
from tributary.staging import StagingWriter

CREATE = (
    "CREATE TABLE {name} (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, "
    "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))"
)
COLUMNS = [("id", "bigint"), ("k", "int"), ("c", "char(120)"), ("pad", "char(60)")]
BATCH_ROWS = 960
# A downstream sized for its data: both tables (~0.2 GB each at 1M changes) fit in the buffer
# pool. With the test servers' 128 MB, streaming's random updates wait on page reads and the
# baseline is mostly that stall (about 8k rows/s at 1M against 36k at 200k).
DOWNSTREAM_ARGS = ("--innodb-buffer-pool-size=1G", *BENCH_ARGS)


def table(schema: str) -> TableInfo:
    return TableInfo.build(schema, "sbtest", COLUMNS, ["id"])


def backlog(schema: str, rows: int, seed: int) -> Iterator[Txn]:
    """The same transactions for any ``schema`` (same seed)."""
    rng = random.Random(seed)
    t = table(schema)
    live: dict[int, dict[str, SqlValue]] = {}
    next_id, done, ts = 1, 0, 1000
    while done < rows:
        changes: list[RowChange] = []
        touched: set[int] = set()
        for _ in range(min(rng.randint(1, 10), rows - done)):
            if rng.random() < 0.7 or next_id < 100:
                row: dict[str, SqlValue] = {
                    "id": next_id,
                    "k": rng.randrange(1 << 20),
                    "c": f"{next_id:0120d}",
                    "pad": f"{rng.getrandbits(200):060x}"[:60],
                }
                live[next_id] = row
                touched.add(next_id)
                next_id += 1
                changes.append(RowChange.insert(t, row))
            else:
                rid = rng.randrange(1, next_id)
                if rid in touched:
                    continue
                touched.add(rid)
                old = live[rid]
                new = {
                    **old,
                    "k": int(old["k"] or 0) + 1,
                    "c": f"{rng.getrandbits(400):0120x}"[:120],
                }
                live[rid] = new
                changes.append(RowChange.update(t, old, new))
        if changes:
            done += len(changes)
            ts += 10
            yield Txn(ts, ts - 1, rows=tuple(changes))


async def streaming(db: MariaDBServer, rows: int, seed: int) -> float:
    await db.execute("CREATE DATABASE bench_stream")
    await db.execute(CREATE.format(name="bench_stream.sbtest"))
    url = db.dsn() + "?consistent=true"
    async with open_sink(url, SinkOptions(cluster_id=1)) as sink:
        sink.safe_mode = False
        t0 = time.perf_counter()
        batch: list[Txn] = []
        weight = 0
        for txn in backlog("bench_stream", rows, seed):
            batch.append(txn)
            weight += len(txn.rows)
            if weight >= BATCH_ROWS:
                await sink.apply(batch)
                batch, weight = [], 0
        if batch:
            await sink.apply(batch)
        return time.perf_counter() - t0


async def with_spark(db: MariaDBServer, rows: int, seed: int, work: Path) -> dict[str, float]:
    """Seconds: in all, of the staging write, of the Spark session start."""
    await db.execute("CREATE DATABASE bench_spark")
    await db.execute(CREATE.format(name="bench_spark.sbtest"))
    t0 = time.perf_counter()
    writer = StagingWriter(work / "range", 0)
    for txn in backlog("bench_spark", rows, seed):
        writer.add(txn)
        if writer.full:
            await asyncio.to_thread(writer.flush)
    await asyncio.to_thread(writer.close)
    staged = time.perf_counter() - t0
    spark = spark_session("bench-catchup", "local[*]", driver_memory="1g")
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter() - t0 - staged
    try:
        await asyncio.to_thread(
            run_catchup, spark, work / "range", db.dsn(), Progress(io.StringIO())
        )
    finally:
        spark.stop()
    return {"all": time.perf_counter() - t0, "staging": staged, "session": started}


async def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    template = make_template(work / "mariadb-template")
    with running_server(template, work / "downstream", DOWNSTREAM_ARGS) as db:
        stream_s = await streaming(db, args.rows, args.seed)
        spark = await with_spark(db, args.rows, args.seed, work)
        spark_s = spark["all"]
        a = await db.query("SELECT COUNT(*) FROM bench_stream.sbtest")
        b = await db.query("SELECT COUNT(*) FROM bench_spark.sbtest")
        ca = (await db.query("CHECKSUM TABLE bench_stream.sbtest"))[0][1]
        cb = (await db.query("CHECKSUM TABLE bench_spark.sbtest"))[0][1]
        if a != b or ca != cb:
            raise SystemExit(f"results differ: {a} {b} {ca} {cb}")
    return {
        "bench": "catchup",
        "row_changes": args.rows,
        "final_rows": int(a[0][0]),
        "streaming_rows_per_s": round(args.rows / stream_s),
        "spark_rows_per_s": round(args.rows / spark_s),
        "ratio": round(stream_s / spark_s, 2),
        "streaming_s": round(stream_s, 1),
        "spark_s": round(spark_s, 1),
        "spark_staging_write_s": round(spark["staging"], 1),
        "spark_session_start_s": round(spark["session"], 1),
        "spark_job_s": round(spark_s - spark["staging"] - spark["session"], 1),
        "target_ratio": 5.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-catchup-") as tmp:
        result = asyncio.run(measure(Path(tmp), args))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
