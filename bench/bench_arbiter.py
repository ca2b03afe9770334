"""``binlog-arbiter`` (Kafka -> MariaDB) against the drainer's own MariaDB sink on the same rows.

Setup: a real KRaft broker and a private MariaDB on loopback. The transactions of
``bench_kafka`` (a sysbench-like table, ``--rows`` row changes in 10-row transactions, 70 %
inserts, 20 % updates, 10 % deletes) after two DDLs (CREATE DATABASE, CREATE TABLE) are written
to a topic by the ``kafka://`` sink beforehand.

1. Arbiter: ``python -m services.arbiter`` as a real process, ``[down]`` the MariaDB server with
   ``consistent = true`` (each upstream transaction with its checkpoint in one downstream
   transaction, as the drainer's MariaDB figure is taken). The clock runs from the spawn of the
   process (so its start, about a second, is in the figure, as in ``bench_drainer``) until the
   downstream checkpoint reaches the last transaction; its CPU seconds come from /proc.
2. Drainer sink: the same transactions, decoded, applied by the drainer's MariaDB sink
   (``mysql://...?consistent=true``) in this process in batches of ``--batch``, as the
   drainer's syncer hands them over: what the drainer itself does downstream, without the
   pumps and the merge (``bench_drainer`` measures those). The clock covers opening the sink,
   the DDLs and the rows; CPU seconds are this process's.

Both start from an empty downstream each round (the database and the checkpoint tables
dropped); ``--rounds`` rounds, interleaved. Prints one JSON line (``"bench": "arbiter"``) with
the medians of rows/s and CPU-seconds per 100k rows of each and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import asyncmy
import uvloop

from bench.bench_drainer import cpu_seconds, downstream_checkpoint
from bench.bench_kafka import workload
from tests.support.kafka import run_kafka
from tests.support.mariadb import BENCH_ARGS, MariaDBServer, make_template, running_server
from tributary.change import Ddl, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.schemes import open_sink

REPO = Path(__file__).resolve().parents[1]
TOPIC = "arbiter_bench"
DDLS = [
    Txn(10, ddl=Ddl("", "CREATE DATABASE sbtest")),
    Txn(
        20,
        ddl=Ddl(
            "sbtest",
            "CREATE TABLE sbtest1 (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, "
            "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))",
            "sbtest1",
        ),
    ),
]
Run = tuple[float, float]  # wall seconds, CPU seconds


async def reset(db: MariaDBServer) -> None:
    await db.execute("DROP DATABASE IF EXISTS sbtest")
    await db.execute("DROP DATABASE IF EXISTS tidb_binlog")


async def checkpoint_at_least(conn: Any, ts: int, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await downstream_checkpoint(conn) >= ts:
                return
        except asyncmy.errors.ProgrammingError:
            await conn.commit()  # the checkpoint table does not exist yet
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the downstream checkpoint did not reach {ts} within {within:.0f} s")


def start_arbiter(db: MariaDBServer, bootstrap: str, work: Path) -> subprocess.Popen[bytes]:
    config = work / "arbiter.toml"
    config.write_text(
        'addr = "127.0.0.1:0"\nlog-level = "warn"\n'
        f'[up]\nkafka-addrs = "{bootstrap}"\ntopic = "{TOPIC}"\ninitial-commit-ts = 0\n'
        f'[down]\nurl = "{db.dsn()}?consistent=true"\n'
    )
    with open(work / "arbiter.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "services.arbiter", "--config", str(config)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


async def run_arbiter(
    db: MariaDBServer, bootstrap: str, work: Path, last: int, within: float
) -> Run:
    wall = time.perf_counter()
    proc = start_arbiter(db, bootstrap, work)
    conn = await asyncmy.connect(host=db.host, port=db.port, user=db.user, password=db.password)
    try:
        await checkpoint_at_least(conn, last, within)
        return time.perf_counter() - wall, cpu_seconds(proc.pid)
    finally:
        conn.close()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def run_sink(db: MariaDBServer, txns: list[Txn], batch: int) -> Run:
    wall, cpu = time.perf_counter(), time.process_time()
    async with open_sink(f"{db.dsn()}?consistent=true", SinkOptions(cluster_id=1)) as sink:
        await sink.apply(DDLS)
        for i in range(0, len(txns), batch):
            await sink.apply(txns[i : i + batch])
        assert await sink.checkpoint() == txns[-1].commit_ts
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    txns = workload(args.rows, 10, args.seed)
    rows = sum(len(t.rows) for t in txns)
    runs: dict[str, list[Run]] = {"arbiter": [], "drainer_sink": []}
    with tempfile.TemporaryDirectory(prefix="bench-arbiter-") as tmp:
        work = Path(tmp)
        template = make_template(work / "mariadb-template")
        with (
            run_kafka(work / "kafka") as broker,
            running_server(template, work / "db", BENCH_ARGS) as db,
        ):
            url = f"kafka://{broker.bootstrap}/{TOPIC}"
            async with open_sink(url, SinkOptions(cluster_id=1)) as topic:
                await topic.apply(DDLS + txns)
            for r in range(args.rounds):
                for name in ("arbiter", "drainer_sink")[:: 1 if r % 2 == 0 else -1]:
                    await reset(db)
                    if name == "arbiter":
                        run = await run_arbiter(
                            db, broker.bootstrap, work, txns[-1].commit_ts, args.timeout
                        )
                    else:
                        run = await run_sink(db, txns, args.batch)
                    runs[name].append(run)
    out: dict[str, Any] = {"bench": "arbiter", "rows": rows, "rounds": args.rounds}
    for name, timed in runs.items():
        wall, cpu = median(w for w, _ in timed), median(c for _, c in timed)
        out[f"{name}_rows_per_s"] = round(rows / wall)
        out[f"{name}_cpu_s_per_100k_rows"] = round(cpu * 100_000 / rows, 3)
        out[f"{name}_rows_per_s_runs"] = [round(rows / w) for w, _ in timed]
    out["ratio_to_drainer_sink"] = round(
        median(w for w, _ in runs["drainer_sink"]) / median(w for w, _ in runs["arbiter"]), 3
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=200, help="transactions per sink batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    print(json.dumps(uvloop.run(measure(args))))


if __name__ == "__main__":
    main()
