"""The drainer's kafka:// sink against a bare aiokafka producer sending the same bytes.

Setup: a real KRaft broker (``tests.support.kafka``) on loopback. ``--rows`` row changes of a
sysbench-like table (``id`` primary key, ``k`` int, ``c`` char(120), ``pad`` char(60)) in
transactions of ``--txn-rows`` rows (70 % inserts, 20 % updates, 10 % deletes) are built as
decoded ``Txn`` values, as the drainer's syncer hands them to its sink.

1. Sink: the sink (tidb-binlog's layout, acks=all, idempotent, its default settings) applies them
   in batches of ``--batch`` transactions, as the drainer does (the Kafka sink is pipelined:
   each batch is submitted while the acks of earlier ones are outstanding, then one flush); the
   clock covers encoding, sending and the acks, up to the checkpoint of the last one. The pumps
   and the merge are not in this figure (``bench_drainer`` measures those).
2. Bare: the same messages, encoded beforehand, sent by one aiokafka producer with the same
   settings (acks=all, idempotent, the sink's record batch size, linger 0) to another topic of
   the same broker, ``--window`` messages at a time, waiting for every ack. It fills record
   batches itself and hands each whole to the producer (``--bare-mode batch``), the fastest way
   aiokafka offers; ``--bare-mode send`` sends message by message.
3. Exactly once: the same as 1 with ``kafka-exactly-once=true`` (a Kafka transaction and a
   checkpoint record per ``kafka-max-messages`` messages).

The three run ``--rounds`` times on one broker, interleaved (the order rotates each round), each
on fresh topics. Prints one JSON line (``"bench": "drainer_kafka"``): the medians of rows/s,
messages/s and CPU-seconds of this process per 100k rows of each, the ratios of the medians to
the bare producer, and every round's rows/s. The machine may be shared: compare ratios, not
absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import uvloop
from aiokafka import AIOKafkaProducer

from tests.support.kafka import run_kafka
from tributary.change import RowChange, TableInfo, Txn
from tributary.sinks import Pipelined, SinkOptions
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


Run = tuple[float, float]  # wall seconds, CPU seconds of this process


def clock() -> Run:
    return time.perf_counter(), time.process_time()


def since(start: Run) -> Run:
    return time.perf_counter() - start[0], time.process_time() - start[1]


async def run_sink(url: str, txns: list[Txn], batch: int) -> Run:
    async with open_sink(url, SinkOptions(cluster_id=1)) as sink:
        await sink.apply(txns[:1])  # connection and metadata outside the clock
        start = clock()
        if isinstance(sink, Pipelined):  # as the drainer's syncer drives it
            for i in range(1, len(txns), batch):
                await sink.submit(txns[i : i + batch])
            await sink.flush()
        else:
            for i in range(1, len(txns), batch):
                await sink.apply(txns[i : i + batch])
        assert await sink.checkpoint() == txns[-1].commit_ts
        return since(start)


async def run_bare(
    bootstrap: str, topic: str, values: list[bytes], args: argparse.Namespace
) -> Run:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        max_request_size=1 << 30,
        max_batch_size=args.bare_batch_size,
        linger_ms=0,
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, values[0], partition=0)
        start = clock()
        for i in range(1, len(values), args.window):
            window = values[i : i + args.window]
            if args.bare_mode == "send":
                futures = [await producer.send(topic, v, partition=0) for v in window]
            else:
                futures = []
                builder = producer.create_batch()
                for v in window:
                    if builder.append(timestamp=None, key=None, value=v) is None:
                        futures.append(await producer.send_batch(builder, topic, partition=0))
                        builder = producer.create_batch()
                        builder.append(timestamp=None, key=None, value=v)
                futures.append(await producer.send_batch(builder, topic, partition=0))
            await asyncio.gather(*futures)
        return since(start)
    finally:
        await producer.stop()


async def rounds(
    txns: list[Txn], values: list[bytes], args: argparse.Namespace
) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {"bare": [], "sink": [], "exactly_once": []}
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        with run_kafka(Path(tmp) / "kafka") as broker:
            b = broker.bootstrap
            extra = f"&{args.sink_options}" if args.sink_options else ""
            await run_bare(b, "warm", values[: len(values) // 4], args)  # warms the broker
            order = list(runs)
            for r in range(args.rounds):
                for name in order[r % 3 :] + order[: r % 3]:
                    if name == "bare":
                        runs[name].append(await run_bare(b, f"bare{r}", values, args))
                        continue
                    eo = "&kafka-exactly-once=true" if name == "exactly_once" else ""
                    url = f"kafka://{b}/{name}{r}?kafka-max-messages={args.window}{eo}{extra}"
                    runs[name].append(await run_sink(url, txns, args.batch))
    return runs


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    txns = workload(args.rows, args.txn_rows, args.seed)
    values = [v for t in txns if (v := encode_txn(t)) is not None]
    rows = sum(len(t.rows) for t in txns[1:])
    messages = len(txns) - 1
    runs = await rounds(txns, values, args)
    encode = []
    for _ in range(args.rounds):
        start = clock()
        for t in txns:
            encode_txn(t)
        encode.append(since(start))
    med = {k: (median(w for w, _ in v), median(c for _, c in v)) for k, v in runs.items()}
    out: dict[str, Any] = {
        "bench": "drainer_kafka",
        "rows": rows,
        "messages": messages,
        "message_bytes_avg": round(sum(map(len, values)) / len(values)),
        "rounds": args.rounds,
        "bare_mode": args.bare_mode,
        "bare_batch_size": args.bare_batch_size,
    }
    for name, (wall, cpu) in med.items():
        out[f"{name}_rows_per_s"] = round(rows / wall)
        out[f"{name}_messages_per_s"] = round(messages / wall)
        out[f"{name}_cpu_s_per_100k_rows"] = round(cpu * 100_000 / rows, 3)
    out["ratio_to_bare"] = round(med["bare"][0] / med["sink"][0], 3)
    out["exactly_once_ratio_to_bare"] = round(med["bare"][0] / med["exactly_once"][0], 3)
    out["encode_rows_per_s"] = round(rows / median(w for w, _ in encode))
    out["encode_cpu_s_per_100k_rows"] = round(median(c for _, c in encode) * 100_000 / rows, 3)
    for name, timed in runs.items():
        out[f"{name}_rows_per_s_runs"] = [round(rows / w) for w, _ in timed]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--txn-rows", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200, help="transactions per sink batch")
    parser.add_argument("--window", type=int, default=1024, help="kafka-max-messages")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bare-mode", choices=("batch", "send"), default="batch")
    parser.add_argument(
        "--bare-batch-size",
        type=int,
        default=512 << 10,
        help="the bare producer's max_batch_size (bytes); the sink's default kafka-batch-size",
    )
    parser.add_argument("--sink-options", default="", help="more kafka:// URL options")
    args = parser.parse_args()
    print(json.dumps(uvloop.run(measure(args))))


if __name__ == "__main__":
    main()
