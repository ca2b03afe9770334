"""A real drainer process writing tidb-binlog's secondary binlog to a real Kafka broker, then a
consumer of ours rebuilding the rows: every transaction and DDL once, in commit order, on
partition 0 of ``<cluster-id>_obinlog``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support.pipeline import ORDERS, commit, ddl, row, running_pipeline
from tributary.change import RowKind, Txn
from tributary.ddlhistory import Action
from tributary.sinks.kafka.secondary import decode_txn
from tributary.sinks.kafka.sink import KafkaSettings, last_commit_ts

if TYPE_CHECKING:
    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]
pytestmark = [pytest.mark.etcd, pytest.mark.timeout(240)]


async def consume(bootstrap: str, topic: str) -> list[tuple[int, Txn]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        assert topic in await consumer.topics()
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, 0)
        out: list[tuple[int, Txn]] = []
        last = -1
        while last < end - 1:
            for msgs in (await consumer.getmany(timeout_ms=1000)).values():
                out += [(m.partition, decode_txn(m.value)) for m in msgs if m.value is not None]
                last = max([last, *(m.offset for m in msgs)])
        return out
    finally:
        await consumer.stop()


async def test_drainer_kafka_sink_rebuilt_by_a_consumer(tmp_path: Path, kafka: KafkaBroker) -> None:
    async with running_pipeline(tmp_path, pumps=2) as pipe:
        first = await pipe.tso.get_ts()
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        last = 0
        for rid in range(1, 41):
            last = await commit(pipe, row(ORDERS.id, version, rid))
        start = ["--initial-commit-ts", str(first)]
        drainer = await pipe.cluster.start_drainer(f"kafka://{kafka.bootstrap}/", extra=start)
        topic = f"{pipe.cluster_id}_obinlog"
        settings = KafkaSettings((kafka.bootstrap,), topic)
        async with asyncio.timeout(90):
            while (await last_commit_ts(settings) or 0) < last:
                assert drainer.child.running
                await asyncio.sleep(0.5)
        assert await drainer.child.stop(30) == 0

    got = await consume(kafka.bootstrap, topic)
    assert {p for p, _ in got} == {0}
    ts = [t.commit_ts for _, t in got]
    assert ts == sorted(set(ts)) and ts[-1] == last
    ddls = [t.ddl.query for _, t in got if t.ddl is not None]
    assert ddls == ["CREATE DATABASE shop", "CREATE TABLE orders (id BIGINT PRIMARY KEY)"]
    table: dict[object, dict[str, object]] = {}
    for _, t in got:
        for r in t.rows:
            assert (r.table.schema, r.table.table) == ("shop", "orders")
            key = r.values["id"]
            if r.kind is RowKind.DELETE:
                table.pop(key, None)
            else:
                table[key] = dict(r.values)
    assert sorted(table) == list(range(1, 41))  # type: ignore[type-var]
