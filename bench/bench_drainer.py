"""Drainer throughput and latency into a real MariaDB, against a direct multi-row INSERT client.

Setup: etcd, two pumps and a drainer as real processes (``DemoCluster``), a private MariaDB
downstream. Sysbench-like tables (``id`` primary key, ``k`` with a secondary index, ``c`` and
``pad`` strings) are created through the DDL history and DDL binlogs, so the drainer creates
them downstream itself.

1. Backlog: about ``--rows`` row changes written through the pump client before the drainer
   starts: half in transactions of 1-10 rows (70 % inserts, 20 % updates, 10 % deletes), half
   in transactions of 100 inserted rows. The drainer then starts (consistent mode) and the
   clock runs from its spawn until the downstream checkpoint passes the last transaction.
   Baseline, same run: the same number of rows loaded into a fresh table of the same shape by
   one client with 1000-row ``INSERT`` statements. Also reported: the drainer's CPU seconds
   (user + system, from its start to that checkpoint) and rows per CPU second, the figure to
   compare across runs on a shared machine, where wall-clock rates follow the other load; the
   CPU-seconds MariaDB and the pumps spent meanwhile, and MariaDB's for the baseline's load,
   which say whether the two cores were full.
2. Latency: with the drainer caught up, single-row transactions at a steady ``--rate`` per
   second for ``--seconds``; a transaction is visible once the downstream checkpoint (written
   in the same downstream transaction as its rows) reaches its commit ts. Reported: p50/p99 of
   visible time minus the time its commit ts was taken (the upstream commit point).

Prints two JSON lines (``drainer_backlog`` and ``drainer_latency``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncmy
import uvloop

from bench.bench_pump_write import peak_rss_mib
from bench.upstream import Upstream, open_upstream, write_all
from services.demo.cluster import DemoCluster
from services.demo.procs import Supervisor
from tests.support.mariadb import BENCH_ARGS, MariaDBServer, make_template, running_server
from tributary.ddlhistory import Action
from tributary.ddlhistory.build import table_info
from tributary.sinks.checkpoint import CheckpointRecord
from tributary.tidbcodec import (
    BytesDatum,
    Datum,
    IntDatum,
    encode_deleted_row,
    encode_inserted_row,
    encode_updated_row,
)
from tributary.tidbcodec import mysqltypes as mt
from tributary.wire.binlog import MutationType, PrewriteValue, TableMutation

COLUMNS = [
    ("id", mt.ColumnType(mt.TYPE_LONGLONG, flag=mt.NOT_NULL_FLAG, flen=20)),
    ("k", mt.ColumnType(mt.TYPE_LONG, flag=mt.NOT_NULL_FLAG, flen=11)),
    ("c", mt.ColumnType(mt.TYPE_STRING, flag=mt.NOT_NULL_FLAG, flen=120, charset="utf8mb4")),
    ("pad", mt.ColumnType(mt.TYPE_STRING, flag=mt.NOT_NULL_FLAG, flen=60, charset="utf8mb4")),
]
CREATE = (
    "CREATE TABLE {name} (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, "
    "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))"
)
SMALL, LARGE, STEADY = (
    table_info(10 + i, f"sbtest{i}", COLUMNS, primary_key=["id"]) for i in (1, 2, 3)
)
INS, UPD, DEL = (
    MutationType(m) for m in (MutationType.Insert, MutationType.Update, MutationType.DeleteRow)
)

Row = tuple[int, int, str, str]


def cols(r: Row) -> list[tuple[int, Datum]]:
    return [
        (1, IntDatum(r[0])),
        (2, IntDatum(r[1])),
        (3, BytesDatum(r[2].encode())),
        (4, BytesDatum(r[3].encode())),
    ]


def new_row(rng: random.Random, rid: int) -> Row:
    return rid, rng.randrange(1 << 20), f"{rng.getrandbits(400):0120x}"[:120], f"{rid:060d}"


def prewrite_value(
    version: int, table_id: int, changes: Sequence[tuple[MutationType, Row, Row | None]]
) -> bytes:
    m = TableMutation(table_id=table_id)
    for kind, row, old in changes:
        if kind == INS:
            m.inserted_rows.append(encode_inserted_row([IntDatum(row[0])], cols(row)))
        elif kind == UPD:
            assert old is not None
            m.updated_rows.append(encode_updated_row(cols(old), cols(row)))
        else:
            m.deleted_rows.append(encode_deleted_row(cols(row)))
        m.sequence.append(kind)
    return bytes(PrewriteValue(schema_version=version, mutations=[m]))


def backlog_values(version: int, rows: int, seed: int) -> list[bytes]:
    """PrewriteValues for ``rows`` row changes: half small mixed txns, half 100-row inserts."""
    rng = random.Random(seed)
    values: list[bytes] = []
    live: dict[int, Row] = {}
    ids: list[int] = []
    next_id = 1
    done = 0
    while done < rows // 2:
        changes: list[tuple[MutationType, Row, Row | None]] = []
        touched: set[int] = set()
        for _ in range(rng.randint(1, 10)):
            p = rng.random()
            if p < 0.7 or len(ids) < 100:
                row = new_row(rng, next_id)
                next_id += 1
                live[row[0]] = row
                ids.append(row[0])
                changes.append((INS, row, None))
                touched.add(row[0])
                continue
            rid = ids[rng.randrange(len(ids))]
            if rid in touched or rid not in live:
                continue
            touched.add(rid)
            old = live[rid]
            if p < 0.9:
                new = (rid, old[1] + 1, old[2], old[3])
                live[rid] = new
                changes.append((UPD, new, old))
            else:
                del live[rid]
                changes.append((DEL, old, None))
        if changes:
            values.append(prewrite_value(version, SMALL.id, changes))
            done += len(changes)
    big_id = 1
    while done < rows:
        batch = [(INS, new_row(rng, big_id + i), None) for i in range(100)]
        big_id += 100
        values.append(prewrite_value(version, LARGE.id, batch))
        done += 100
    return values


async def downstream_checkpoint(conn: Any) -> int:
    async with conn.cursor() as cur:
        await cur.execute("SELECT checkPoint FROM tidb_binlog.checkpoint")
        rows = await cur.fetchall()
    await conn.commit()  # end the read snapshot so the next poll sees new commits
    return max((CheckpointRecord.from_json(r[0]).commit_ts for r in rows), default=0)


async def wait_checkpoint(conn: Any, ts: int, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await downstream_checkpoint(conn) >= ts:
                return
        except asyncmy.errors.ProgrammingError:
            pass  # the checkpoint table does not exist yet
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the downstream checkpoint did not reach {ts} within {within:.0f} s")


async def baseline(db: MariaDBServer, rows: int, seed: int) -> tuple[float, float]:
    """rows/s loading ``rows`` rows with 1000-row INSERT statements, autocommit, one client,
    and the CPU-seconds MariaDB spent on them."""
    rng = random.Random(seed)
    data = [new_row(rng, i + 1) for i in range(rows)]
    conn = await asyncmy.connect(
        host=db.host, port=db.port, user=db.user, password=db.password, autocommit=True
    )
    try:
        async with conn.cursor() as cur:
            await cur.execute("CREATE DATABASE IF NOT EXISTS bench_base")
            await cur.execute(CREATE.format(name="bench_base.sbtest"))
            assert db.proc is not None
            db_cpu0 = cpu_seconds(db.proc.pid)
            t0 = time.perf_counter()
            for i in range(0, rows, 1000):
                chunk = data[i : i + 1000]
                sql = "INSERT INTO bench_base.sbtest VALUES " + ",".join(
                    ["(%s,%s,%s,%s)"] * len(chunk)
                )
                await cur.execute(sql, [v for r in chunk for v in r])
            return rows / (time.perf_counter() - t0), cpu_seconds(db.proc.pid) - db_cpu0
    finally:
        conn.close()


async def steady(up: Upstream, conn: Any, rate: float, seconds: float) -> list[float]:
    """Commit-to-visible latencies (s) of single-row transactions at ``rate`` per second."""
    committed: dict[int, float] = {}
    visible: dict[int, float] = {}
    rng = random.Random(7)
    n = int(rate * seconds)
    values = [
        prewrite_value(up.version, STEADY.id, [(INS, new_row(rng, i + 1), None)]) for i in range(n)
    ]
    gate = asyncio.Semaphore(1000)
    stop = asyncio.Event()

    async def one(v: bytes) -> None:
        async with gate:
            await up.txn(v, lambda ts: committed.__setitem__(ts, time.monotonic()))

    async def watch() -> None:
        while not stop.is_set() or len(visible) < len(committed):
            ckpt = await downstream_checkpoint(conn)
            now = time.monotonic()
            for ts in [t for t in committed if t not in visible and t <= ckpt]:
                visible[ts] = now
            await asyncio.sleep(0.02)

    async with asyncio.TaskGroup() as tg:
        watcher = tg.create_task(watch(), name="bench-visibility")
        t0 = time.monotonic()
        for i, v in enumerate(values):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tg.create_task(one(v), name="bench-steady-txn")
        stop.set()
        await asyncio.wait_for(watcher, 120)
    return [visible[ts] - committed[ts] for ts in committed]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and of its live children (a decoding pool)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process exited meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        if int(stat.parent.name) == pid or int(fields[1]) == pid:  # fields[1]: ppid
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(work: Path, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    template = make_template(work / "mariadb-template")
    with running_server(template, work / "downstream", BENCH_ARGS) as db:
        base_rate, base_db_cpu = await baseline(db, args.rows, args.seed)
        assert db.proc is not None
        root = work / "cluster"
        root.mkdir()
        async with DemoCluster(root, Supervisor(root)) as cluster:
            etcd = await cluster.start_etcd()
            await cluster.start_pumps(2)
            async with open_upstream(etcd.url) as up:
                first = await up.tso.get_ts()
                await up.ddl(1, Action.CREATE_SCHEMA, None, "CREATE DATABASE bench")
                for job_id, t in ((2, SMALL), (3, LARGE), (4, STEADY)):
                    await up.ddl(job_id, Action.CREATE_TABLE, t, CREATE.format(name=t.name))
                values = backlog_values(up.version, args.rows, args.seed)
                t0 = time.perf_counter()
                await write_all(up, values)
                write_s = time.perf_counter() - t0
                sink = db.dsn() + "?consistent=true"
                pump_pids = [p.child.pid for p in cluster.pumps]
                pumps_cpu0 = sum(cpu_seconds(pid) for pid in pump_pids)
                db_cpu0 = cpu_seconds(db.proc.pid)
                t0 = time.perf_counter()
                drainer = await cluster.start_drainer(
                    sink, extra=["--initial-commit-ts", str(first)]
                )
                conn = await asyncmy.connect(
                    host=db.host, port=db.port, user=db.user, password=db.password
                )
                try:
                    await wait_checkpoint(conn, up.last_commit, args.timeout)
                    elapsed = time.perf_counter() - t0
                    cpu = cpu_seconds(drainer.child.pid)
                    pumps_cpu = sum(cpu_seconds(pid) for pid in pump_pids) - pumps_cpu0
                    db_cpu = cpu_seconds(db.proc.pid) - db_cpu0
                    latencies = await steady(up, conn, args.rate, args.seconds)
                finally:
                    conn.close()
                rss = peak_rss_mib(drainer.child.pid)
    rows_per_s = args.rows / elapsed
    backlog = {
        "bench": "drainer_backlog",
        "row_changes": args.rows,
        "txns": len(values),
        "backlog_write_s": round(write_s, 1),
        "drainer_rows_per_s": round(rows_per_s),
        "baseline_multirow_insert_rows_per_s": round(base_rate),
        "ratio_to_baseline": round(rows_per_s / base_rate, 3),
        "drainer_peak_rss_mib": round(rss, 1),
        "drainer_cpu_s": round(cpu, 1),
        "drainer_rows_per_cpu_s": round(args.rows / cpu),
        "pumps_cpu_s_while_draining": round(pumps_cpu, 1),
        "downstream_cpu_s_while_draining": round(db_cpu, 1),
        "baseline_downstream_cpu_s": round(base_db_cpu, 1),
        "drain_s": round(elapsed, 1),
        "target_rows_per_s": 30000,
        "target_ratio": 0.8,
    }
    latency = {
        "bench": "drainer_latency",
        "txns_per_s": args.rate,
        "seconds": args.seconds,
        "txns": len(latencies),
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(pct(latencies, 0.99), 3),
        "max_s": round(max(latencies), 3),
        "target_p99_s": 1.0,
    }
    return backlog, latency


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-drainer-") as tmp:
        backlog, latency = uvloop.run(measure(Path(tmp), args))
    print(json.dumps(backlog))
    print(json.dumps(latency))


if __name__ == "__main__":
    main()
