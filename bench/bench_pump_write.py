"""Pump write throughput: concurrent writers through the pump client, 1 KB binlogs, fsync on.

Prints one JSON line: binlogs/s on the batched path (``binlogext.PumpBatch``),
again with twice the writers (the client keeps two batches in flight per pump,
and two full ones need more than ``--writers`` callers: each has one write
outstanding), the unary path (``binlog.Pump/WriteBinlog``), the pump's peak RSS, and a
baseline measured in the same run: append + fdatasync of the same batches of
framed 1 KB records from one Python process, with the ratio to it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

import uvloop

from services.demo.cluster import DemoCluster
from services.demo.procs import Supervisor
from services.pump.storage.record import encode_batch
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.pumpclient import PumpsClient
from tributary.wire.binlog import Binlog, BinlogType

PAYLOAD = 1024


def raw_baseline(workdir: Path, total: int, batch: int) -> float:
    """binlogs/s for append + fdatasync of ``batch``-record groups, one process."""
    record = bytes(Binlog(tp=BinlogType.Prewrite, start_ts=1, prewrite_value=b"x" * PAYLOAD))  # type: ignore[arg-type]
    path = workdir / "raw.vlog"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        t0 = time.perf_counter()
        done = 0
        while done < total:
            data, _ = encode_batch([record] * batch)
            os.write(fd, data)
            os.fdatasync(fd)
            done += batch
        return done / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()


async def drive(etcd_url: str, batch: bool, writers: int, seconds: float, base: int) -> float:
    """binlogs/s (prewrites + commits) acknowledged through the pump client."""
    value = b"v" * (PAYLOAD - 40)
    async with EtcdKv.connect([etcd_url]) as kv:
        cluster_id = await read_cluster_id(kv)
        assert cluster_id is not None
        async with PumpsClient(kv, cluster_id, batch=batch) as client:
            ts = itertools.count(base, 2)
            done = 0
            deadline = time.perf_counter() + seconds

            async def writer() -> None:
                nonlocal done
                while time.perf_counter() < deadline:
                    start = next(ts)
                    await client.prewrite(start, value, b"pk")
                    await client.commit(start, start + 1)
                    done += 2

            t0 = time.perf_counter()
            async with asyncio.TaskGroup() as tg:
                for i in range(writers):
                    tg.create_task(writer(), name=f"bench-writer-{i}")
            return done / (time.perf_counter() - t0)


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def measure(work: Path, writers: int, seconds: float) -> tuple[float, float, float, float]:
    """(unary, batched, batched with twice the writers) binlogs/s against one pump process,
    and its peak RSS in MiB."""
    root = work / "cluster"
    root.mkdir()
    async with DemoCluster(root, Supervisor(root)) as cluster:
        etcd = await cluster.start_etcd()
        (pump,) = await cluster.start_pumps(1)
        unary = await drive(etcd.url, False, writers, seconds / 2, 1 << 40)
        batched = await drive(etcd.url, True, writers, seconds, 1 << 41)
        doubled = await drive(etcd.url, True, 2 * writers, seconds, 1 << 42)
        return unary, batched, doubled, peak_rss_mib(pump.child.pid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--writers", type=int, default=512)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pump-") as tmp:
        work = Path(tmp)
        baseline = raw_baseline(work, total=200_000, batch=512)
        unary, batched, doubled, rss = uvloop.run(measure(work, args.writers, args.seconds))
    print(
        json.dumps(
            {
                "bench": "pump_write",
                "binlog_bytes": PAYLOAD,
                "writers": args.writers,
                "batched_binlogs_per_s": round(batched),
                "batched_twice_the_writers_per_s": round(doubled),
                "unary_binlogs_per_s": round(unary),
                "baseline_raw_append_fdatasync_per_s": round(baseline),
                "ratio_batched_to_baseline": round(batched / baseline, 3),
                "pump_peak_rss_mib": round(rss, 1),
                "target_batched_per_s": 35000,
            }
        )
    )


if __name__ == "__main__":
    main()
