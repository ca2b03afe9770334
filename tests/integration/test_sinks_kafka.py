"""The kafka:// sink on a real broker: one secondary binlog per transaction on partition 0, the
checkpoint read back from the topic, an unreachable broker retried without loss or duplicates
(after sequential batches and after pipelined ones with their acks outstanding),
a message over the broker's limit refused with the transaction named, and record batches kept
under the limit by kafka-batch-size (a batch over it refused with the batch named)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import Pipelined, SinkError, SinkOptions
from tributary.sinks.kafka.secondary import decode_txn
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]

T = TableInfo.build("db", "t", [("id", "bigint"), ("v", "varchar(64)")], ["id"])
OPTS = SinkOptions(cluster_id=6789)


def txn(ts: int, *ids: int, size: int = 1) -> Txn:
    rows = tuple(RowChange.insert(T, {"id": i, "v": "x" * size}) for i in ids)
    return Txn(ts, ts - 1, rows=rows)


async def read_topic(bootstrap: str, topic: str) -> list[tuple[int, Txn]]:
    """Every message of partition 0 of ``topic``: (partition, transaction)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        assert topic in await consumer.topics()  # also loads the topic's metadata
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        assert end > 0, f"{topic} is empty"
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


async def test_batches_checkpoint_and_broker_outage(kafka: KafkaBroker) -> None:
    url = f"kafka://{kafka.bootstrap}/?ack-timeout=3"
    async with open_sink(url, OPTS) as sink:
        assert await sink.checkpoint() is None
        await sink.apply([txn(10, 1, 2), Txn(11), txn(12, 3)])
        await sink.apply([Txn(20, ddl=Ddl("db", "alter table t add c int", "t"))])
        assert await sink.checkpoint() == 20
        kafka.kill()
        with pytest.raises(SinkError) as e:
            await sink.apply([txn(30, 4), txn(31, 5)])
        assert e.value.retriable
        kafka.start()
        await sink.apply([txn(30, 4), txn(31, 5)])  # the drainer's retry of the same batch
        assert await sink.checkpoint() == 31
    async with open_sink(url, OPTS) as sink:  # a restarted drainer: the topic says where it is
        assert await sink.checkpoint() == 31
        await sink.apply([txn(12, 3), txn(31, 5), txn(40, 6)])  # a replay: only 40 is new
    got = await read_topic(kafka.bootstrap, "6789_obinlog")
    assert {p for p, _ in got} == {0}
    assert [t.commit_ts for _, t in got] == [10, 12, 20, 30, 31, 40]
    assert [dict(r.values)["id"] for _, t in got for r in t.rows] == [1, 2, 3, 4, 5, 6]
    assert got[2][1].ddl == Ddl("db", "alter table t add c int", "t")


async def test_pipelined_batches_and_an_outage_while_acks_are_outstanding(
    kafka: KafkaBroker,
) -> None:
    url = f"kafka://{kafka.bootstrap}/?ack-timeout=3&kafka-max-messages=3"
    async with open_sink(url, OPTS) as sink:
        assert isinstance(sink, Pipelined)
        for ts in range(10, 30, 4):  # five batches, each ending with a marker
            await sink.submit([txn(ts, ts), txn(ts + 2, ts + 2), Txn(ts + 3)])
        await sink.flush()
        assert await sink.checkpoint() == 29
        unacked: list[Txn] = []
        with pytest.raises(SinkError) as e:
            for ts in range(30, 40, 2):
                batch = [txn(ts, ts)]
                unacked += batch
                await sink.submit(batch)
                if ts == 32:
                    kafka.kill()
            await sink.flush()
        assert e.value.retriable  # no ack in time, from a submit waiting for room or the flush
        acked = await sink.checkpoint()
        assert acked is not None and acked < unacked[-1].commit_ts
        kafka.start()
        await sink.apply(unacked)  # the drainer's retry: everything it has no ack for
        assert await sink.checkpoint() == unacked[-1].commit_ts
    got = await read_topic(kafka.bootstrap, "6789_obinlog")
    assert [t.commit_ts for _, t in got] == [*range(10, 30, 2), *(t.commit_ts for t in unacked)]


async def test_message_over_the_broker_limit_names_the_transaction(
    kafka_factory: Callable[..., KafkaBroker],
) -> None:
    broker = kafka_factory(message_max_bytes="20000")
    async with open_sink(f"kafka://{broker.bootstrap}/big?ack-timeout=10", OPTS) as sink:
        await sink.apply([txn(5, 1)])
        with pytest.raises(SinkError, match=r"txn 6 \(start ts 5, 1 row changes\)") as e:
            await sink.apply([txn(6, 2, size=50000)])
        assert not e.value.retriable
        assert await sink.checkpoint() == 5
        await sink.apply([txn(7, 3)])  # the drainer stops; a sink reopened still works
    assert [t.commit_ts for _, t in await read_topic(broker.bootstrap, "big")] == [5, 7]


async def test_record_batches_over_the_broker_limit(
    kafka_factory: Callable[..., KafkaBroker],
) -> None:
    broker = kafka_factory(message_max_bytes="20000")
    many = [txn(ts, ts, size=1500) for ts in range(10, 40)]  # 1.5 KB each, 45 KB in all
    url = f"kafka://{broker.bootstrap}/small?ack-timeout=10&kafka-batch-size=16KiB"
    async with open_sink(url, OPTS) as sink:
        await sink.apply(many)
        assert await sink.checkpoint() == 39
    assert [t.commit_ts for _, t in await read_topic(broker.bootstrap, "small")] == list(
        range(10, 40)
    )
    url = f"kafka://{broker.bootstrap}/large?ack-timeout=10&kafka-batch-size=64KiB"
    async with open_sink(url, OPTS) as sink:
        with pytest.raises(SinkError, match=r"a record batch of \d+ messages \(txns 10 to") as e:
            await sink.apply(many)
        assert "kafka-batch-size" in str(e.value) and not e.value.retriable
        assert await sink.checkpoint() is None
