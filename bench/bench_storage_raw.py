"""Pump storage write throughput vs. a raw append+fdatasync of the same batches.

Workload: ``--callers`` concurrent writers each run transactions: write a
prewrite (``--size`` bytes of row data), then its commit, through
``Storage.write`` with ``sync_log`` on, one binlog per call (as the unary
WriteBinlog RPC does). A second run passes ``--per-call`` transactions per
call (as the batched WriteBinlogs RPC does). The baseline frames the payloads
of the first run into the same number of batches as the storage formed and
only appends and fdatasyncs them to one file (no index, no sorter, no event
loop).

The disk is shared: one fdatasync takes from a fraction of a millisecond to several
milliseconds depending on what else writes, so a ratio of two runs minutes apart says
little. The runs are therefore done in ``--rounds`` rounds (storage, raw right after it
with the same batches, then the batched storage run), and the figures are the medians
of the rounds, the ratio the median of each round's own ratio. CPU per binlog
(``time.process_time`` over the storage run: the storage, its threads and the bench's
caller tasks) is the figure that does not follow the disk.

The storage runs as in the pump's storage process: on uvloop (``--loop asyncio`` for the
standard loop) with the garbage collector's thresholds the pump sets
(``tributary.servicekit.gctune``).

Prints one JSON line: binlogs/s for each, the ratios to the baseline, batch figures.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import uvloop

from services.pump.storage import Storage, StorageSettings, WriteItem
from services.pump.storage.record import encode_batch
from tributary.servicekit.gctune import relax_gc
from tributary.wire import ts
from tributary.wire.binlog import Binlog, BinlogType
from tributary.wire.peek import peek

PREWRITE = BinlogType(BinlogType.Prewrite)
COMMIT = BinlogType(BinlogType.Commit)


def _payloads(txns: int, size: int) -> list[tuple[WriteItem, WriteItem]]:
    value = os.urandom(size)
    base = ts.from_seconds(time.time())  # real TSO-shaped ts, so no prewrite looks timed out
    out = []
    for i in range(txns):
        start, commit = base + 2 * i + 1, base + 2 * i + 2
        p = bytes(Binlog(tp=PREWRITE, start_ts=start, prewrite_value=value))
        c = bytes(Binlog(tp=COMMIT, start_ts=start, commit_ts=commit))
        out.append((WriteItem(p, peek(p)), WriteItem(c, peek(c))))
    return out


async def _storage_run(
    data_dir: Path, pairs: list[tuple[WriteItem, WriteItem]], callers: int, per_call: int
) -> tuple[float, int, float]:
    """(seconds, batches the storage formed, CPU seconds of this process meanwhile)"""
    it = iter([pairs[i : i + per_call] for i in range(0, len(pairs), per_call)])

    async def caller() -> None:
        for chunk in it:
            await storage.write([p for p, _ in chunk])
            await storage.write([c for _, c in chunk])

    async with Storage.open(
        data_dir, StorageSettings(sync_log=True, stop_write_at_available_space=0)
    ) as storage:
        t0, c0 = time.perf_counter(), time.process_time()
        async with asyncio.TaskGroup() as tg:
            for n in range(callers):
                tg.create_task(caller(), name=f"bench-caller-{n}")
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert storage.max_commit_ts == pairs[-1][1].header.commit_ts, storage.max_commit_ts
        return took, storage.stats.batches, cpu


def _raw_run(path: Path, pairs: list[tuple[WriteItem, WriteItem]], batches: int) -> float:
    payloads = [x.payload for pair in pairs for x in pair]
    per = -(-len(payloads) // batches)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        t0 = time.perf_counter()
        for i in range(0, len(payloads), per):
            buf, _ = encode_batch(itertools.islice(payloads, i, i + per))
            os.write(fd, buf)
            os.fdatasync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--txns", type=int, default=40_000)
    ap.add_argument("--size", type=int, default=1024, help="prewrite row bytes")
    ap.add_argument("--callers", type=int, default=256)
    ap.add_argument("--per-call", type=int, default=32, help="txns per call in the batched run")
    ap.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    pairs = _payloads(args.txns, args.size)
    binlogs = 2 * len(pairs)
    run = uvloop.run if args.loop == "uvloop" else asyncio.run
    relax_gc()
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp:
            took, batches, cpu = run(_storage_run(Path(tmp) / "a", pairs, args.callers, 1))
            raw = _raw_run(Path(tmp) / "raw.vlog", pairs, batches)
            callers = max(1, args.callers // args.per_call)
            took_b, batches_b, cpu_b = run(
                _storage_run(Path(tmp) / "b", pairs, callers, args.per_call)
            )
        rounds.append(
            {
                "storage": binlogs / took,
                "raw": binlogs / raw,
                "ratio": raw / took,
                "batched": binlogs / took_b,
                "ratio_batched": raw / took_b,
                "batches": batches,
                "batches_b": batches_b,
                "cpu_us": cpu / binlogs * 1e6,
                "cpu_us_b": cpu_b / binlogs * 1e6,
            }
        )

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    print(
        json.dumps(
            {
                "bench": "storage_raw",
                "binlogs": binlogs,
                "callers": args.callers,
                "prewrite_bytes": args.size,
                "loop": args.loop,
                "rounds": args.rounds,
                "batches": round(med("batches")),
                "binlogs_per_batch": round(binlogs / med("batches"), 1),
                "storage_binlogs_per_s": round(med("storage")),
                "raw_binlogs_per_s": round(med("raw")),
                "ratio_storage_to_raw": round(med("ratio"), 3),
                "storage_cpu_us_per_binlog": round(med("cpu_us"), 2),
                "batched_per_call": args.per_call,
                "batched_binlogs_per_s": round(med("batched")),
                "batched_binlogs_per_batch": round(binlogs / med("batches_b"), 1),
                "ratio_batched_to_raw": round(med("ratio_batched"), 3),
                "batched_cpu_us_per_binlog": round(med("cpu_us_b"), 2),
                "ratio_rounds": [round(r["ratio"], 3) for r in rounds],
            }
        )
    )


if __name__ == "__main__":
    main()
