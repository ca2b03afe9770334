"""Exactly once into Kafka across SIGKILLs: a real drainer process writing to a real broker with
``kafka-exactly-once=true`` is killed again and again while transactions keep arriving; a
``read_committed`` consumer then sees every upstream transaction exactly once, in commit-ts order,
and the checkpoint topic holds the last one. Twice: tidb-binlog's layout (one message per
transaction on partition 0), and one message per row change partitioned by primary key over three
partitions, where a transaction spans several messages and partitions."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.kafka_read import read_partition
from tests.support.pipeline import ORDERS, commit, ddl, row, running_pipeline
from tributary.ddlhistory import Action
from tributary.sinks.checkpoint import CheckpointRecord
from tributary.sinks.kafka.secondary import decode_txn

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]
pytestmark = [pytest.mark.etcd, pytest.mark.timeout(420)]

KILLS = 4
ROWS = 240


LAYOUTS = {
    "txn-on-partition-0": ("", 1),
    "row-per-key": ("&kafka-partition-by=key&kafka-message-per=row", 3),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
async def test_sigkilled_drainer_writes_each_transaction_once(
    tmp_path: Path, kafka_factory: Callable[..., KafkaBroker], layout: str
) -> None:
    options, partitions = LAYOUTS[layout]
    kafka = kafka_factory(num_partitions=str(partitions))
    rng = random.Random(15)
    async with running_pipeline(tmp_path, pumps=2) as pipe:
        first = await pipe.tso.get_ts()
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        url = f"kafka://{kafka.bootstrap}/?kafka-exactly-once=true&kafka-max-messages=7{options}"
        start = ["--initial-commit-ts", str(first), "--syncer-batch-rows", "20"]
        drainer = await pipe.cluster.start_drainer(url, extra=start)
        rows: list[int] = []

        async def write() -> None:
            for rid in range(1, ROWS + 1):
                rows.append(await commit(pipe, row(ORDERS.id, version, rid)))
                await asyncio.sleep(rng.uniform(0, 0.01))

        writer = asyncio.create_task(write(), name="test-writer")
        try:
            for _ in range(KILLS):
                await asyncio.sleep(rng.uniform(0.5, 2.0))
                drainer.child.kill()  # SIGKILL, mid-stream
                drainer = await pipe.cluster.start_drainer(url, extra=start)
            await writer
        finally:
            writer.cancel()
        topic = f"{pipe.cluster_id}_obinlog"
        async with asyncio.timeout(120):
            while True:
                marks = await read_partition(kafka.bootstrap, f"{topic}_checkpoint")
                done = (
                    CheckpointRecord.from_json(marks[-1].value.decode()).commit_ts if marks else 0
                )
                if done >= rows[-1]:
                    break
                assert drainer.child.running
                await asyncio.sleep(0.5)
        assert await drainer.child.stop(30) == 0

    parts = [await read_partition(kafka.bootstrap, topic, p) for p in range(partitions)]
    everything = [
        await read_partition(kafka.bootstrap, topic, p, committed=False) for p in range(partitions)
    ]
    print("committed", sum(map(len, parts)), "written", sum(map(len, everything)))
    assert {m.key for m in marks} == {str(pipe.cluster_id).encode()}
    if partitions == 1:
        got = [decode_txn(m.value) for m in parts[0]]
        ts = [t.commit_ts for t in got]
        ddls = [t.ddl.query for t in got if t.ddl is not None]
        assert ddls == ["CREATE DATABASE shop", "CREATE TABLE orders (id BIGINT PRIMARY KEY)"]
        assert ts == sorted(set(ts)) and len(ts) == ROWS + 2
        assert ts[2:] == rows  # every row transaction once, in commit order
        assert [r.values["id"] for t in got for r in t.rows] == list(range(1, ROWS + 1))
        return
    seen: dict[Any, int] = {}
    for records in parts:
        got = [decode_txn(m.value) for m in records]
        ts = [t.commit_ts for t in got]
        assert ts == sorted(set(ts))  # commit order within each partition, nothing twice
        ddls = [t.ddl.query for t in got if t.ddl is not None]
        assert ddls == ["CREATE DATABASE shop", "CREATE TABLE orders (id BIGINT PRIMARY KEY)"]
        for t in got:
            for r in t.rows:
                assert r.values["id"] not in seen
                seen[r.values["id"]] = t.commit_ts
    assert seen == {rid: ts for rid, ts in zip(range(1, ROWS + 1), rows, strict=True)}
