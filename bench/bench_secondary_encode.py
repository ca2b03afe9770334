"""The secondary-binlog encoder alone: ``tributary.sinks.kafka.secondary.encode_txn`` against the
plain field-by-field encoder it replaced (``tests/support/secondary_reference.py``), on the
workload of ``bench_kafka`` (sysbench-like rows, 10-row transactions, 70/20/10 % insert, update,
delete). No I/O: it measures the CPU the drainer spends per message.

Each round runs both, interleaved, ``--rounds`` times; prints one JSON line
(``"bench": "secondary_encode"``) with the medians of rows/s and CPU-seconds per 100k rows of
each, and the median speed-up. The machine may be shared: compare the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from bench.bench_kafka import workload
from tests.support import secondary_reference
from tributary.change import Txn
from tributary.sinks.kafka.secondary import encode_txn


def timed(encode: Callable[[Txn], bytes | None], txns: list[Txn]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to encode every transaction."""
    cpu, wall = time.process_time(), time.perf_counter()
    for t in txns:
        encode(t)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--txn-rows", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    txns = workload(args.rows, args.txn_rows, args.seed)
    assert all(encode_txn(t) == secondary_reference.encode_txn(t) for t in txns)
    rows = sum(len(t.rows) for t in txns)
    new: list[tuple[float, float]] = []
    ref: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        new.append(timed(encode_txn, txns))
        ref.append(timed(secondary_reference.encode_txn, txns))

    def med(runs: list[tuple[float, float]], i: int) -> float:
        return statistics.median(r[i] for r in runs)

    print(
        json.dumps(
            {
                "bench": "secondary_encode",
                "rows": rows,
                "rounds": args.rounds,
                "encode_rows_per_s": round(rows / med(new, 0)),
                "encode_cpu_s_per_100k_rows": round(med(new, 1) * 100_000 / rows, 3),
                "reference_rows_per_s": round(rows / med(ref, 0)),
                "reference_cpu_s_per_100k_rows": round(med(ref, 1) * 100_000 / rows, 3),
                "speedup": round(
                    statistics.median(r[0] / n[0] for r, n in zip(ref, new, strict=True)), 2
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
