"""Taking over a Kafka output from tidb-binlog's drainer.

tidb-binlog's drainer writes one secondary binlog per transaction to partition 0 of
``<cluster-id>_obinlog`` and keeps its checkpoint in ``<data-dir>/savepoint``, saved at most
every 3 s, so after a crash the topic can hold messages past it. Here the topic holds t1 and t2
as it writes them and its savepoint says t1 (it died before saving t2); a real drainer process
on real pumps, on that data-dir and topic, sends t3 and later once each and t2 not again: our
sink starts after the topic's last message. The savepoint it leaves is tidb-binlog's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaProducer

from tests.support.kafka_read import read_partition
from tests.support.pipeline import ORDERS, commit, ddl, row, running_pipeline
from tests.support.tidb_binlog_go import go_read_savepoint, go_savepoint
from tests.support.waits import until
from tributary.change import RowChange, TableInfo, Txn
from tributary.ddlhistory import Action
from tributary.sinks.kafka.secondary import decode_txn, encode_txn
from tributary.sinks.kafka.sink import KafkaSettings, last_commit_ts

if TYPE_CHECKING:
    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]
pytestmark = [pytest.mark.etcd, pytest.mark.timeout(240)]

TABLE = TableInfo.build("shop", "orders", [("id", "bigint")], ["id"])


async def go_messages(bootstrap: str, topic: str, txns: list[Txn]) -> None:
    """The messages tidb-binlog's drainer writes: partition 0, no key, one per transaction."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for t in txns:
            value = encode_txn(t)
            assert value is not None
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()


async def test_a_drainer_takes_over_tidb_binlogs_topic(tmp_path: Path, kafka: KafkaBroker) -> None:
    async with running_pipeline(tmp_path, pumps=2) as pipe:
        await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
        version = await ddl(
            pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
        )
        c1, c2 = [await commit(pipe, row(ORDERS.id, version, rid)) for rid in (1, 2)]
        topic = f"{pipe.cluster_id}_obinlog"
        inserts = [
            Txn(c, c - 1, (RowChange.insert(TABLE, {"id": i}),)) for i, c in ((1, c1), (2, c2))
        ]
        await go_messages(kafka.bootstrap, topic, inserts)
        data = tmp_path / "drainer"  # tidb-binlog's data-dir, taken over
        data.mkdir()
        (data / "savepoint").write_text(go_savepoint(c1, version, consistent=False))
        c3, c4 = [await commit(pipe, row(ORDERS.id, version, rid)) for rid in (3, 4)]

        drainer = await pipe.cluster.start_drainer(f"kafka://{kafka.bootstrap}/")
        (c5,) = [await commit(pipe, row(ORDERS.id, version, 5))]
        settings = KafkaSettings((kafka.bootstrap,), topic)

        async def sent() -> bool:
            return (await last_commit_ts(settings) or 0) >= c5

        await until(sent, within=90)
        assert await drainer.child.stop(30) == 0

    records = await read_partition(kafka.bootstrap, topic, committed=False)
    got = [decode_txn(r.value) for r in records if r.value is not None]
    assert [t.commit_ts for t in got] == [c1, c2, c3, c4, c5]
    assert [int(str(t.rows[0].values["id"])) for t in got] == [1, 2, 3, 4, 5]
    back = go_read_savepoint((data / "savepoint").read_text())
    assert back.consistent and back.commit_ts >= c5
