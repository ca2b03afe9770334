"""Pump write throughput: concurrent writers through the pump client, 1 KB binlogs, fsync on.

Prints one JSON line: binlogs/s on the batched path (``binlogext.PumpBatch``)
and the unary path (``binlog.Pump/WriteBinlog``), the pump's peak RSS, and a
baseline measured in the same run: append + fdatasync of the same batches of
framed 1 KB records from one Python process, with the ratio to it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster import etcd, peak_rss_mib, pump
from coord.cluster_id import read_cluster_id
from coord.etcd import EtcdKv
from pumpclient import PumpsClient
from services.pump.storage.record import encode_batch
from wire.binlog import Binlog, BinlogType

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--writers", type=int, default=512)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pump-") as tmp:
        work = Path(tmp)
        baseline = raw_baseline(work, total=200_000, batch=512)
        with etcd(work) as url, pump(work, "pump", url) as proc:
            import uvloop

            unary = uvloop.run(drive(url, False, args.writers, args.seconds / 2, 1 << 40))
            batched = uvloop.run(drive(url, True, args.writers, args.seconds, 1 << 41))
            rss = peak_rss_mib(proc.pid)
    print(
        json.dumps(
            {
                "bench": "pump_write",
                "binlog_bytes": PAYLOAD,
                "writers": args.writers,
                "batched_binlogs_per_s": round(batched),
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
