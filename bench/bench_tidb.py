"""What writing binlogs through our pumps costs TiDB: the same load with binlog on and off.

Setup (all real processes, ``tests.support.tidb``'s pipeline, binaries looked up as the tests
do): etcd, two pumps, a binlog-tso, a tidb-server with binlog on writing through the pumps
(TiDB's own pump client, as in ``tests/integration/test_tidb_server.py``), and a drainer
applying its binlogs to MariaDB (consistent mode); beside them a second tidb-server with binlog
off (the same binary, the same embedded store, in memory on both).

Load: ``--clients`` asyncmy connections (default 16), each running small transactions back to
back (TiDB's default, pessimistic): BEGIN, an INSERT of one sysbench-shaped row (``id``, ``k``
with an index, ``c`` CHAR(120), ``pad`` CHAR(60)), an UPDATE of a row this client inserted
before, COMMIT. Phases of ``--seconds`` (default 20) alternate binlog off and on, ``--rounds``
times (off, on, off, on), after a short warm-up of each server, so that the machine's other
load falls on both. After each binlog-on phase: the drainer's lag (how far the downstream
checkpoint is behind TiDB's clock as the phase ends, and how long until it holds everything
committed in the phase); the next phase starts once it does, so the drainer never eats the
next phase's CPU.

Prints one JSON line: per phase transactions/s, p50/p99 latency (BEGIN to COMMIT's reply) and
CPU milliseconds per transaction of the tidb-server, of the pumps and of the drainer; per mode
the transactions/s over all its phases and the latencies' median; ``ratio_on_off`` (binlog on
over off) and ``lost_pct``; the drainer's lags; whether the checker found MariaDB equal to
TiDB at the end; the machine (CPUs, load average before and after). TiDB documents a few
percent lost with its Go pumps on a cluster whose pumps have machines of their own; here the
pumps, the drainer, MariaDB and this client share the machine's CPUs with TiDB.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncmy
import asyncmy.errors
import uvloop

from bench.bench_pump_unary import tree, tree_cpu_seconds
from tests.support.mariadb import make_template
from tests.support.pipeline import mysql_checkpoint
from tests.support.tidb import TidbPipeline, TidbServer, running_tidb, running_tidb_pipeline
from tributary.checker import compare
from tributary.wire.ts import physical_ms

TABLE = (
    "CREATE TABLE bench.t (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0,"
    " c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))"
)


@dataclass
class Server:
    """One tidb-server under load: its ids and the processes whose CPU counts for it."""

    name: str  # "off" or "on"
    tidb: TidbServer
    extra_pids: dict[str, list[int]] = field(default_factory=dict)  # pumps, drainer
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))


@dataclass
class Phase:
    txns: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)


async def client(server: Server, n: int, stop_at: float, phase: Phase) -> None:
    """Small transactions on one connection until ``stop_at`` (monotonic)."""
    t = server.tidb
    conn = await asyncmy.connect(
        host=t.host, port=t.port, user=t.user, password=t.password, autocommit=True
    )
    rng = random.Random(n)
    mine: list[int] = []
    try:
        async with conn.cursor() as cur:
            while time.monotonic() < stop_at:
                new = next(server.ids)
                began = time.perf_counter()
                try:
                    await cur.execute("BEGIN")
                    await cur.execute(
                        "INSERT INTO bench.t (id, k, c, pad) VALUES (%s, %s, %s, %s)",
                        (new, rng.randrange(1 << 20), f"{rng.getrandbits(400):0120x}"[:120],
                         f"{new:060d}"),
                    )  # fmt: skip
                    if mine:
                        await cur.execute(
                            "UPDATE bench.t SET k = k + 1 WHERE id = %s", (rng.choice(mine),)
                        )
                    await cur.execute("COMMIT")
                except asyncmy.errors.MySQLError:
                    phase.errors += 1
                    await cur.execute("ROLLBACK")
                    continue
                phase.latencies.append(time.perf_counter() - began)
                phase.txns += 1
                mine.append(new)
    finally:
        conn.close()


def cpu(pids: Sequence[int]) -> float:
    """CPU seconds of the processes and their children (a pump's front processes)."""
    return sum(tree_cpu_seconds(tree(pid)) for pid in pids)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def run_phase(server: Server, clients: int, seconds: float) -> dict[str, Any]:
    assert server.tidb.proc is not None
    pids = {"tidb": [server.tidb.proc.pid], **server.extra_pids}
    before = {k: cpu(v) for k, v in pids.items()}
    phase = Phase()
    began = time.monotonic()
    await asyncio.gather(*(client(server, n, began + seconds, phase) for n in range(clients)))
    elapsed = time.monotonic() - began
    used = {k: cpu(v) - before[k] for k, v in pids.items()}
    per_txn = max(phase.txns, 1)
    return {
        "binlog": server.name,
        "txn_per_s": round(phase.txns / elapsed, 1),
        "txns": phase.txns,
        "errors": phase.errors,
        "p50_ms": round(statistics.median(phase.latencies) * 1000, 2) if phase.txns else None,
        "p99_ms": round(pct(phase.latencies, 0.99) * 1000, 2),
        **{f"{k}_cpu_ms_per_txn": round(v / per_txn * 1000, 3) for k, v in used.items()},
        "_latencies": phase.latencies,
        "_elapsed": elapsed,
    }


async def drainer_lag(pipe: TidbPipeline) -> dict[str, float | None]:
    """How far the downstream checkpoint is behind TiDB's clock now, and the seconds until
    it holds every transaction committed before now."""
    d = pipe.downstream
    ts = await pipe.tidb.current_ts()
    checkpoint = await mysql_checkpoint(d.host, d.port, d.user, d.password)
    behind = (physical_ms(ts) - physical_ms(checkpoint)) / 1000 if checkpoint else None
    began = time.monotonic()
    await pipe.caught_up(within=600)
    return {
        "behind_at_end_s": round(behind, 2) if behind is not None else None,
        "caught_up_after_s": round(time.monotonic() - began, 2),
    }


async def setup(servers: Sequence[Server]) -> None:
    for s in servers:
        async with s.tidb.connect() as conn, conn.cursor() as cur:
            await cur.execute("CREATE DATABASE bench")
            await cur.execute(TABLE)


def summary(phases: list[dict[str, Any]], name: str) -> dict[str, Any]:
    mine = [p for p in phases if p["binlog"] == name]
    latencies = [x for p in mine for x in p["_latencies"]]
    return {
        "txn_per_s": round(sum(p["txns"] for p in mine) / sum(p["_elapsed"] for p in mine), 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(pct(latencies, 0.99) * 1000, 2),
    }


async def measure(pipe: TidbPipeline, off: TidbServer, args: argparse.Namespace) -> dict[str, Any]:
    on_server = Server(
        "on",
        pipe.tidb,
        {
            "pumps": [p.proc.pid for p in pipe.pumps],
            "drainer": [pipe.drainer.proc.pid],
        },
    )
    off_server = Server("off", off)
    await setup([off_server, on_server])
    for s in (off_server, on_server):  # warm-up, not counted
        await run_phase(s, args.clients, args.warmup)
    await pipe.caught_up(within=600)
    phases: list[dict[str, Any]] = []
    lags: list[dict[str, float | None]] = []
    for _ in range(args.rounds):
        for s in (off_server, on_server):
            await asyncio.sleep(args.settle)
            phases.append(await run_phase(s, args.clients, args.seconds))
            if s is on_server:
                lags.append(await drainer_lag(pipe))
    report = await compare(pipe.tidb.dsn("bench"), pipe.downstream.dsn("bench"))
    result_off, result_on = summary(phases, "off"), summary(phases, "on")
    ratio = result_on["txn_per_s"] / result_off["txn_per_s"]
    return {
        "off": result_off,
        "on": result_on,
        "ratio_on_off": round(ratio, 3),
        "lost_pct": round((1 - ratio) * 100, 1),
        "drainer_lag": lags,
        "downstream_equal": report.equal,
        "phases": [{k: v for k, v in p.items() if not k.startswith("_")} for p in phases],
    }


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {"cpus": os.cpu_count(), "cpu_model": model}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clients", type=int, default=16, help="concurrent connections")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    ap.add_argument("--rounds", type=int, default=2, help="off/on pairs of phases")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of warm-up per server")
    ap.add_argument("--settle", type=float, default=2.0, help="idle seconds before a phase")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-tidb-") as tmp:
        work = Path(tmp)
        template = make_template(work / "mariadb-template")
        (work / "on").mkdir()
        with (
            running_tidb_pipeline(work / "on", template) as pipe,
            running_tidb(work / "off", in_memory=True) as off,
        ):
            result = uvloop.run(measure(pipe, off, args))
    print(
        json.dumps(
            {
                "bench": "tidb_binlog",
                "clients": args.clients,
                "phase_s": args.seconds,
                "rounds": args.rounds,
                **result,
                "machine": {
                    **machine(),
                    "load_before": [round(x, 2) for x in load_before],
                    "load_after": [round(x, 2) for x in os.getloadavg()],
                },
            }
        )
    )


if __name__ == "__main__":
    main()
