"""Capture source throughput: a MariaDB binlog backlog read by ``mysqlsource`` into sinks.

Setup: a private MariaDB upstream (ROW binlog, FULL row metadata) and a private downstream.
A sysbench-like table (``id`` primary key, ``k`` int, ``c`` varchar(120), ``pad`` char(60)) is
created, then about ``--rows`` row events are written before any reader starts: 70 % inserts
in transactions of 100 rows, 20 % updates and 10 % deletes in transactions of 100 rows each.

Measured, same run, each from the backlog's start position to its end:

1. raw: the binlog dump alone (``mysqlsource.dump``: framing, no checksum, no decoding) -> the
   reader's ceiling, as rows/s of the backlog's rows;
2. blackhole: ``open_source`` -> whole transactions (CRC32 checked, rows decoded into
   ``RowChange``s) -> ``BlackholeSink`` in batches;
3. mariadb: the same into the downstream through ``sinks.mysql`` (consistent mode).

The raw read takes a fraction of a second, so it is the best of three reads.

``--compare-readers`` adds the raw row-decoding rate of python-mysql-replication and
asyncmy.replication when they are installed (rows/s over the first 100,000 inserted rows).
``--compare-tree DIR`` times another checkout's reader (``git worktree add DIR <commit>``) against
this tree's on the same backlog, each as its own process (``bench/capture_reader.py``), the two
alternated for ``--rounds`` rounds: the best wall and CPU rows/s of each and their ratios, which
is how a suspected regression is told apart from a slower machine.
Prints one JSON line: rows/s of each, and blackhole/raw and mariadb/blackhole ratios.
Target (issue 4): >= 30,000 rows/s to blackhole.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.mariadb import BENCH_ARGS, MariaDBServer, make_template, running_server
from tributary.change import TableFilter, Txn
from tributary.sinks import Sink, SinkOptions
from tributary.sinks.blackhole.sink import BlackholeSink
from tributary.sinks.schemes import open_sink
from tributary.sources.mysql import Position, SourceConfig, current_position, open_source
from tributary.sources.mysql.dump import BinlogDump

FULL = ("--binlog-row-metadata=FULL", "--max-binlog-size=1G")
REPO = Path(__file__).resolve().parents[1]
READER = Path(__file__).with_name("capture_reader.py")
BATCH_ROWS = 5000


def backlog_sql(rows: int, seed: int) -> tuple[str, int]:
    """SQL writing about ``rows`` row events; returns (script, exact row events)."""
    rnd = random.Random(seed)
    inserts = rows * 7 // 10 // 100 * 100
    out = ["USE bench;"]
    for first in range(1, inserts + 1, 100):
        vals = ",".join(
            f"({i},{rnd.randrange(1 << 30)},'{rnd.randrange(10**11):011d}-{'x' * 100}',"
            f"'{'y' * 59}')"
            for i in range(first, first + 100)
        )
        out.append(f"INSERT INTO sbtest VALUES {vals};")
    updates = rows * 2 // 10 // 100
    for _ in range(updates):
        lo = rnd.randrange(1, inserts - 100)
        out.append(f"UPDATE sbtest SET k = k + 1 WHERE id BETWEEN {lo} AND {lo + 99};")
    deletes = rows // 10 // 100
    for n in range(deletes):
        lo = inserts - (n + 1) * 100 + 1
        out.append(f"DELETE FROM sbtest WHERE id BETWEEN {lo} AND {lo + 99};")
    return "\n".join(out), inserts + updates * 100 + deletes * 100


def load(server: MariaDBServer, script: str) -> None:
    subprocess.run(
        [
            "mariadb",
            "--no-defaults",
            "--protocol=TCP",
            f"--host={server.host}",
            f"--port={server.port}",
            f"--user={server.user}",
            f"--password={server.password}",
        ],
        input=script,
        text=True,
        check=True,
    )


def config(server: MariaDBServer) -> SourceConfig:
    return SourceConfig(
        server.host,
        server.port,
        server.user,
        server.password,
        server_id=777,
        filter=TableFilter(do_dbs=["bench"]),
    )


def reached(p: Position, end: Position) -> bool:
    return (p.file, p.pos) >= (end.file, end.pos)


async def raw_read(server: MariaDBServer, start: Position, end: Position) -> tuple[float, int]:
    """Seconds to pull the binlog from ``start`` to ``end`` with the dump alone; bytes read."""
    t0 = time.perf_counter()
    dump = await BinlogDump.open(
        server.host, server.port, server.user, server.password, server_id=778, start=start
    )
    total = 0
    file = start.file
    try:
        while True:
            for ev in await dump.read_events():
                total += len(ev)
                tp = ev[4]
                if tp == 4:  # ROTATE
                    file = ev[27:-4].decode()
                pos = int.from_bytes(ev[13:17], "little")
                if file == end.file and pos >= end.pos:
                    return time.perf_counter() - t0, total
    finally:
        await dump.close()


async def to_sink(cfg: SourceConfig, start: Position, end: Position, sink: Sink) -> float:
    """Seconds from opening the source until the sink applied the backlog's last txn."""
    t0 = time.perf_counter()
    batch: list[Txn] = []
    rows = 0
    async with open_source(cfg, start) as txns:
        async for st in txns:
            batch.append(st.txn)
            rows += len(st.txn.rows)
            done = reached(st.position, end)
            if rows >= BATCH_ROWS or done:
                await sink.apply(batch)
                batch, rows = [], 0
            if done:
                break
    return time.perf_counter() - t0


def reader_run(
    tree: Path, server: MariaDBServer, start: Position, end: Position, rows: int
) -> dict[str, float]:
    """``capture_reader.py`` with ``tree``'s code: wall and CPU seconds of the blackhole read."""
    argv = [server.host, str(server.port), server.user, server.password]
    argv += [start.file, str(start.pos), end.file, str(end.pos), str(rows)]
    out = subprocess.run(
        [sys.executable, str(READER), *argv],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(f"the reader of {tree} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def compare_tree(
    server: MariaDBServer, start: Position, end: Position, rows: int, args: argparse.Namespace
) -> dict[str, Any]:
    trees = {"this": REPO, "other": Path(args.compare_tree).resolve()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(reader_run(tree, server, start, end, rows))
    best = {
        name: (rows / min(r["wall_s"] for r in rs), rows / min(r["cpu_s"] for r in rs))
        for name, rs in runs.items()
    }
    return {
        "compare_tree": str(trees["other"]),
        "this_tree_rows_per_s": round(best["this"][0]),
        "other_tree_rows_per_s": round(best["other"][0]),
        "this_tree_cpu_rows_per_s": round(best["this"][1]),
        "other_tree_cpu_rows_per_s": round(best["other"][1]),
        "this_vs_other": round(best["this"][0] / best["other"][0], 3),
        "this_vs_other_cpu": round(best["this"][1] / best["other"][1], 3),
    }


def compare_readers(server: MariaDBServer, start: Position, rows: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        from pymysqlreplication import BinLogStreamReader  # type: ignore[import-untyped]
        from pymysqlreplication.row_event import WriteRowsEvent  # type: ignore[import-untyped]
    except ImportError:
        out["pymysqlreplication_rows_per_s"] = None
    else:
        settings = {
            "host": server.host,
            "port": server.port,
            "user": server.user,
            "passwd": server.password,
        }
        reader = BinLogStreamReader(
            connection_settings=settings,
            server_id=779,
            blocking=False,
            only_events=[WriteRowsEvent],
            log_file=start.file,
            log_pos=start.pos,
            resume_stream=True,
        )
        t0, n = time.perf_counter(), 0
        for ev in reader:
            n += len(ev.rows)
            if n >= rows:
                break
        out["pymysqlreplication_rows_per_s"] = round(n / (time.perf_counter() - t0))
        reader.close()
    out["asyncmy_replication_rows_per_s"] = asyncio.run(_asyncmy_reader(server, start, rows))
    return out


async def _asyncmy_reader(server: MariaDBServer, start: Position, rows: int) -> int | None:
    try:
        import asyncmy
        from asyncmy.replication.binlogstream import BinLogStream
        from asyncmy.replication.row_events import WriteRowsEvent as AsyncWrite
    except ImportError:
        return None
    kw = {"host": server.host, "port": server.port, "user": server.user}
    conn = asyncmy.Connection(**kw, password=server.password)  # type: ignore[no-untyped-call]
    ctl = asyncmy.Connection(**kw, password=server.password)  # type: ignore[no-untyped-call]
    await ctl.connect()
    stream = BinLogStream(
        conn,
        ctl,
        server_id=780,
        master_log_file=start.file,
        master_log_position=start.pos,
        resume_stream=True,
        only_events=[AsyncWrite],
    )
    t0, n = time.perf_counter(), 0
    async for ev in stream:
        n += len(ev.rows)
        if n >= rows:
            break
    rate = round(n / (time.perf_counter() - t0))
    await stream.close()  # type: ignore[no-untyped-call]
    ctl.close()
    return rate


async def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    template = make_template(work / "mariadb-template")
    with (
        running_server(template, work / "upstream", (*FULL, *BENCH_ARGS)) as up,
        running_server(template, work / "downstream", BENCH_ARGS) as down,
    ):
        cfg = config(up)
        start = await current_position(cfg)
        up.admin(
            "CREATE DATABASE bench; CREATE TABLE bench.sbtest (id bigint PRIMARY KEY,"
            " k int NOT NULL, c varchar(120) NOT NULL, pad char(60) NOT NULL)"
        )
        script, rows = backlog_sql(args.rows, args.seed)
        t0 = time.perf_counter()
        load(up, script)
        load_s = time.perf_counter() - t0
        end = await current_position(cfg)
        raw_s, raw_bytes = min([await raw_read(up, start, end) for _ in range(3)])
        blackhole = BlackholeSink()
        black_s = await to_sink(cfg, start, end, blackhole)
        assert blackhole.rows == rows, (blackhole.rows, rows)
        async with open_sink(down.dsn() + "?consistent=true", SinkOptions(cluster_id=1)) as sink:
            maria_s = await to_sink(cfg, start, end, sink)
        [(count,)] = await down.query("SELECT COUNT(*) FROM bench.sbtest")
        [(want,)] = await up.query("SELECT COUNT(*) FROM bench.sbtest")
        assert count == want, (count, want)
        result: dict[str, Any] = {
            "bench": "capture_source",
            "row_events": rows,
            "binlog_mib": round(raw_bytes / 2**20, 1),
            "load_s": round(load_s, 1),
            "raw_rows_per_s": round(rows / raw_s),
            "blackhole_rows_per_s": round(rows / black_s),
            "mariadb_rows_per_s": round(rows / maria_s),
            "blackhole_vs_raw": round(raw_s / black_s, 3),
            "mariadb_vs_blackhole": round(black_s / maria_s, 3),
            "target_blackhole_rows_per_s": 30000,
        }
        if args.compare_tree:
            result.update(await asyncio.to_thread(compare_tree, up, start, end, rows, args))
        if args.compare_readers:
            inserted = args.rows * 7 // 10 // 100 * 100  # the readers count inserted rows only
            result.update(
                await asyncio.to_thread(compare_readers, up, start, min(100_000, inserted))
            )
        return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="row events in the backlog")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--compare-readers", action="store_true")
    parser.add_argument("--compare-tree", metavar="DIR", help="another checkout's reader, same run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --compare-tree")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        print(json.dumps(asyncio.run(measure(Path(tmp), args))), flush=True)


if __name__ == "__main__":
    main()
