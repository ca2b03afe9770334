"""The kafka:// opt-ins on a real broker: rows partitioned by key over the topic's partitions (order
kept per key, DDL on every partition), per-row messages, exactly once by URL, and SASL/PLAIN."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.kafka_read import read_at_least, read_partition
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.kafka.routing import partition_of, row_key
from tributary.sinks.kafka.secondary import decode_txn
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]

T = TableInfo.build("db", "t", [("id", "bigint"), ("v", "int")], ["id"])
OPTS = SinkOptions(cluster_id=4242)


def batch(ts: int, n: int) -> list[Txn]:
    """Txns ts, ts+1, ...: each updates every key 0..n-1 to its commit ts."""
    return [
        Txn(t, t - 1, rows=tuple(RowChange.insert(T, {"id": k, "v": t}) for k in range(n)))
        for t in range(ts, ts + 3)
    ]


@pytest.mark.parametrize("exactly_once", [False, True])
async def test_partition_by_key_keeps_order_per_key(
    kafka_factory: Callable[..., KafkaBroker], exactly_once: bool
) -> None:
    kafka = kafka_factory(num_partitions="3")
    eo = "&kafka-exactly-once=true" if exactly_once else ""
    url = f"kafka://{kafka.bootstrap}/k?kafka-partition-by=key{eo}"
    ddl = Txn(9, ddl=Ddl("db", "create table t (id bigint primary key, v int)", "t"))
    async with open_sink(url, OPTS) as sink:
        await sink.apply([ddl, *batch(10, 8)])
        await sink.apply(batch(20, 8))
        assert await sink.checkpoint() == 22
    async with open_sink(url, OPTS) as sink:  # only the transactional mode keeps a checkpoint
        assert await sink.checkpoint() == (22 if exactly_once else None)
    keyed = {partition_of(row_key(r), 3) for r in batch(10, 8)[0].rows}
    parts = [
        [
            decode_txn(m.value)
            for m in await read_at_least(kafka.bootstrap, "k", 7 if p in keyed else 1, p)
        ]
        for p in range(3)
    ]
    for p, txns in enumerate(parts):
        assert txns[0].ddl == ddl.ddl  # every partition sees the DDL first
        assert [t.commit_ts for t in txns[1:]] == [10, 11, 12, 20, 21, 22][: len(txns) - 1]
        for t in txns[1:]:
            assert all(partition_of(row_key(r), 3) == p for r in t.rows)
    seen = {
        k: [r.values["v"] for txns in parts for t in txns for r in t.rows if r.values["id"] == k]
        for k in range(8)
    }
    assert all(v == [10, 11, 12, 20, 21, 22] for v in seen.values())


async def test_per_row_messages_on_partition_0(kafka: KafkaBroker) -> None:
    async with open_sink(f"kafka://{kafka.bootstrap}/r?kafka-message-per=row", OPTS) as sink:
        await sink.apply(batch(10, 2))
    got = [decode_txn(m.value) for m in await read_partition(kafka.bootstrap, "r", committed=False)]
    assert [(t.commit_ts, len(t.rows)) for t in got] == [
        (10, 1),
        (10, 1),
        (11, 1),
        (11, 1),
        (12, 1),
        (12, 1),
    ]


async def test_sasl_plain(kafka_factory: Callable[..., KafkaBroker]) -> None:
    kafka = kafka_factory(sasl_users={"drainer": "s3cret"})
    good = f"kafka://drainer:s3cret@{kafka.sasl_bootstrap}/s?ack-timeout=5"
    for exactly_once in ("", "&kafka-exactly-once=true"):
        async with open_sink(good + exactly_once, OPTS) as sink:
            await sink.apply(batch(10 if not exactly_once else 20, 1))
    got = [decode_txn(m.value).commit_ts for m in await read_at_least(kafka.bootstrap, "s", 6)]
    assert got == [10, 11, 12, 20, 21, 22]
    with pytest.raises(SinkError, match="cannot reach the brokers"):
        async with open_sink(f"kafka://drainer:wrong@{kafka.sasl_bootstrap}/s?ack-timeout=5", OPTS):
            pass
    with pytest.raises(SinkError):  # the SASL listener refuses a client without SASL
        async with open_sink(f"kafka://{kafka.sasl_bootstrap}/s?ack-timeout=5", OPTS):
            pass
