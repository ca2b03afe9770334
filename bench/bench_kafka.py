"""The drainer's kafka:// sink against a bare aiokafka producer sending the same bytes.

Setup: a real KRaft broker (``tests.support.kafka``) on loopback. ``--rows`` row changes of a
sysbench-like table (``id`` primary key, ``k`` int, ``c`` char(120), ``pad`` char(60)) in
transactions of ``--txn-rows`` rows (70 % inserts, 20 % updates, 10 % deletes) are built as
decoded ``Txn`` values, as the drainer's syncer hands them to its sink.

1. Sink: the sink (tidb-binlog's layout, acks=all, idempotent) applies them in batches of
   ``--batch`` transactions, as the drainer does; the clock covers encoding, sending and the
   acks, up to the checkpoint of the last one. The pumps and the merge are not in this figure
   (``bench_drainer`` measures those).
2. Bare: the same messages, encoded beforehand, sent by one aiokafka producer with the same
   settings to another topic of the same broker, waiting for every ack; run before and after
   the sink, the faster of the two is the baseline.
3. Exactly once: the same as 1 with ``kafka-exactly-once=true`` (a Kafka transaction and a
   checkpoint record per ``kafka-max-messages`` messages).

Prints one JSON line (``"bench": "drainer_kafka"``): rows/s and messages/s of each, and the
ratios to the bare producer. The machine may be shared: compare ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop
from aiokafka import AIOKafkaProducer

from tests.support.kafka import run_kafka
from tributary.change import RowChange, TableInfo, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.kafka.secondary import encode_txn
from tributary.sinks.schemes import open_sink

T = TableInfo.build(
    "sbtest",
    "sbtest1",
    [("id", "bigint"), ("k", "int"), ("c", "char(120)"), ("pad", "char(60)")],
    ["id"],
)


def workload(rows: int, txn_rows: int, seed: int) -> list[Txn]:
    rng = random.Random(seed)
    live: list[int] = []
    next_id = 1
    txns: list[Txn] = []
    ts = 1000
    while sum(len(t.rows) for t in txns) < rows:
        changes = []
        for _ in range(txn_rows):
            roll = rng.random()
            if live and roll < 0.2:
                rid = rng.choice(live)
                old = {"id": rid, "k": rid, "c": "c" * 120, "pad": "p" * 60}
                changes.append(RowChange.update(T, old, {**old, "k": rng.randrange(1 << 30)}))
            elif live and roll < 0.3:
                rid = live.pop(rng.randrange(len(live)))
                changes.append(
                    RowChange.delete(T, {"id": rid, "k": rid, "c": "c" * 120, "pad": "p" * 60})
                )
            else:
                row = {"id": next_id, "k": rng.randrange(1 << 30), "c": "c" * 120, "pad": "p" * 60}
                live.append(next_id)
                next_id += 1
                changes.append(RowChange.insert(T, row))
        txns.append(Txn(ts + 1, ts, rows=tuple(changes)))
        ts += 2
    return txns


async def run_sink(url: str, txns: list[Txn], batch: int) -> float:
    async with open_sink(url, SinkOptions(cluster_id=1)) as sink:
        await sink.apply(txns[:1])  # connection and metadata outside the clock
        start = time.perf_counter()
        for i in range(1, len(txns), batch):
            await sink.apply(txns[i : i + batch])
        assert await sink.checkpoint() == txns[-1].commit_ts
        return time.perf_counter() - start


async def run_bare(bootstrap: str, values: list[bytes], window: int) -> float:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, max_request_size=1 << 30
    )
    await producer.start()
    try:
        await producer.send_and_wait("bare", values[0], partition=0)
        start = time.perf_counter()
        for i in range(1, len(values), window):
            futures = [await producer.send("bare", v, partition=0) for v in values[i : i + window]]
            await asyncio.gather(*futures)
        return time.perf_counter() - start
    finally:
        await producer.stop()


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    txns = workload(args.rows, args.txn_rows, args.seed)
    values = [v for t in txns if (v := encode_txn(t)) is not None]
    rows = sum(len(t.rows) for t in txns[1:])
    messages = len(txns) - 1
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        with run_kafka(Path(tmp) / "kafka") as broker:
            first = await run_bare(broker.bootstrap, values, args.window)  # also warms the broker
            url = f"kafka://{broker.bootstrap}/sink?kafka-max-messages={args.window}"
            sink = await run_sink(url, txns, args.batch)
            bare = min(first, await run_bare(broker.bootstrap, values, args.window))
            eo_url = f"kafka://{broker.bootstrap}/eo?kafka-max-messages={args.window}&kafka-exactly-once=true"
            eo = await run_sink(eo_url, txns, args.batch)
    encode_start = time.perf_counter()
    for t in txns:
        encode_txn(t)
    encode = time.perf_counter() - encode_start
    return {
        "bench": "drainer_kafka",
        "rows": rows,
        "messages": messages,
        "message_bytes_avg": round(sum(map(len, values)) / len(values)),
        "sink_rows_per_s": round(rows / sink),
        "sink_messages_per_s": round(messages / sink),
        "bare_rows_per_s": round(rows / bare),
        "bare_messages_per_s": round(messages / bare),
        "ratio_to_bare": round(bare / sink, 3),
        "exactly_once_rows_per_s": round(rows / eo),
        "exactly_once_ratio_to_bare": round(bare / eo, 3),
        "encode_rows_per_s": round(rows / encode),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--txn-rows", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200, help="transactions per sink batch")
    parser.add_argument("--window", type=int, default=1024, help="kafka-max-messages")
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    print(json.dumps(uvloop.run(measure(args))))


if __name__ == "__main__":
    main()
