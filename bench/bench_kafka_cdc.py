"""The capture's Kafka sinks: protocol=debezium against protocol=canal-json on the same rows.

Setup: a real KRaft broker (``tests.support.kafka``) on loopback. ``--rows`` row changes of the
sysbench-like table of ``bench_kafka`` (70 % inserts, 20 % updates, 10 % deletes) in
transactions of ``--txn-rows`` rows, as decoded ``Txn`` values the capture's processor hands to
its sink. Each protocol's sink (its default options; debezium with its schemas, one message per
row change, as canal-json) applies them in batches of ``--batch`` transactions; the clock covers
encoding, sending and the acks, up to the last checkpoint. The two run ``--rounds`` times on one
broker, interleaved (the order alternates), each on a fresh topic.

Prints one JSON line (``"bench": "kafka_cdc"``): per protocol the medians of rows/s and of
CPU-seconds of this process per 100k rows, the mean message size, and debezium's ratios to
canal-json. The machine may be shared: compare ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from statistics import median

import uvloop
from aiokafka import AIOKafkaConsumer

from bench.bench_kafka import T, run_sink, workload
from tests.support.kafka import run_kafka

PROTOCOLS = ("debezium", "canal-json")


async def _mean_size(bootstrap: str, topic: str, limit: int = 2000) -> float:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    sizes: list[int] = []
    try:
        while len(sizes) < limit and (batch := await consumer.getmany(timeout_ms=1000)):
            sizes += [len(r.value or b"") for rs in batch.values() for r in rs]
    finally:
        await consumer.stop()
    return sum(sizes) / max(len(sizes), 1)


async def main(args: argparse.Namespace) -> dict[str, object]:
    txns = workload(args.rows, args.txn_rows, args.seed)
    rows = sum(len(t.rows) for t in txns[1:])
    runs: dict[str, list[tuple[float, float]]] = {p: [] for p in PROTOCOLS}
    sizes: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-kafka-cdc-") as tmp:
        with run_kafka(Path(tmp) / "kafka") as broker:
            for r in range(args.rounds):
                order = PROTOCOLS if r % 2 == 0 else PROTOCOLS[::-1]
                for protocol in order:
                    topic = f"{protocol}-{r}"
                    url = (
                        f"kafka://{broker.bootstrap}/{topic}?protocol={protocol}"
                        "&partition-num=1&max-message-bytes=1048576"
                    )
                    runs[protocol].append(await run_sink(url, txns, args.batch))
                    if r == 0:
                        sizes[protocol] = await _mean_size(broker.bootstrap, topic)
    out: dict[str, object] = {"bench": "kafka_cdc", "rows": rows, "rounds": args.rounds}
    for p in PROTOCOLS:
        out[p] = {
            "rows_per_s": round(median(rows / wall for wall, _ in runs[p])),
            "cpu_s_per_100k_rows": round(median(cpu for _, cpu in runs[p]) * 100_000 / rows, 2),
            "mean_message_bytes": round(sizes[p]),
            "rounds_rows_per_s": [round(rows / wall) for wall, _ in runs[p]],
        }
    dbz, canal = out["debezium"], out["canal-json"]
    assert isinstance(dbz, dict) and isinstance(canal, dict)
    out["debezium_vs_canal_json"] = {
        "rows_per_s": round(dbz["rows_per_s"] / canal["rows_per_s"], 2),
        "cpu": round(dbz["cpu_s_per_100k_rows"] / canal["cpu_s_per_100k_rows"], 2),
        "bytes": round(dbz["mean_message_bytes"] / canal["mean_message_bytes"], 2),
    }
    out["table"] = T.qualified
    return out


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_kafka_cdc")
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--txn-rows", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64, help="transactions per sink batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    began = time.monotonic()
    out = uvloop.run(main(args))
    out["seconds"] = round(time.monotonic() - began, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    cli()
