"""The canal-json sink on a real broker: dispatch to partitions, topic rules, watermarks on every
partition, a message over max-message-bytes refused with the row named, and the table rebuilt
by a consumer from the messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support.canal_consumer import CanalRebuilder, partitions
from tests.support.waits import eventually
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]

T = TableInfo.build("db", "t", [("id", "bigint"), ("v", "varchar(64)")], ["id"])
U = TableInfo.build("db", "u", [("id", "bigint")], ["id"])
OPTS = SinkOptions(cluster_id=1)


class Recorder:
    safe_mode = False

    def __init__(self) -> None:
        self.txns: list[Txn] = []

    async def apply(self, txns: Sequence[Txn]) -> None:
        self.txns += txns

    async def checkpoint(self) -> int | None:
        return self.txns[-1].commit_ts if self.txns else None

    async def close(self) -> None:
        return None


async def read_all(bootstrap: str, topic: str) -> list[tuple[int, dict[str, object]]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        assert topic in await consumer.topics()
        tps = [TopicPartition(topic, p) for p in await partitions(bootstrap, topic)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out: list[tuple[int, dict[str, object]]] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                out += [(tp.partition, json.loads(m.value)) for m in msgs if m.value]
        return out
    finally:
        await consumer.stop()


async def test_dispatch_topics_watermarks_and_rebuild(kafka: KafkaBroker) -> None:
    url = (
        f"kafka://{kafka.bootstrap}/cdc?protocol=canal-json&partition-num=4&dispatcher=index-value"
        "&enable-tidb-extension=true&topic-rule=cdc_{schema}_{table}"
    )
    async with open_sink(url, OPTS) as sink:
        await sink.apply([Txn(10, ddl=Ddl("", "CREATE DATABASE db"))])
        await sink.apply([Txn(11, ddl=Ddl("db", "CREATE TABLE t (id BIGINT PRIMARY KEY)", "t"))])
        rows = tuple(RowChange.insert(T, {"id": i, "v": f"v{i}"}) for i in range(40))
        await sink.apply(
            [Txn(20, 19, rows=rows), Txn(21, 20, rows=(RowChange.insert(U, {"id": 1}),))]
        )
        upd = RowChange.update(T, {"id": 3, "v": "v3"}, {"id": 3, "v": "new"})
        await sink.apply([Txn(30, 29, rows=(upd, RowChange.delete(T, {"id": 4, "v": "v4"})))])
        assert await sink.checkpoint() == 30
    got = await read_all(kafka.bootstrap, "cdc_db_t")
    assert {p for p, _ in got} == {0, 1, 2, 3}
    ddl = [m for _, m in got if m["isDdl"]]
    assert [(m["type"], m["sql"]) for m in ddl] == [
        ("CREATE", "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    ]
    assert {m["data"][0]["id"] for _, m in got if m["type"] == "INSERT"} == {
        str(i) for i in range(40)
    }  # type: ignore[index]
    marks = {(p, m["_tidb"]["watermarkTs"]) for p, m in got if m["type"] == "TIDB_WATERMARK"}  # type: ignore[index]
    assert {(p, 30) for p in range(4)} <= marks
    default = await read_all(kafka.bootstrap, "cdc")
    assert [m["sql"] for _, m in default if m["isDdl"]] == ["CREATE DATABASE db"]
    assert [
        m["table"] for _, m in await read_all(kafka.bootstrap, "cdc_db_u") if m["type"] == "INSERT"
    ] == ["u"]

    recorder = Recorder()
    stop = asyncio.Event()
    consumer = CanalRebuilder(kafka.bootstrap, "cdc_db_t", recorder)
    task = asyncio.create_task(consumer.run(stop), name="canal-consumer")
    try:
        await eventually(lambda: consumer.applied >= 30 or task.done(), 60)
    finally:
        stop.set()
        await task
    table: dict[object, object] = {}
    for t in recorder.txns:
        for r in t.rows:
            if r.kind.value == "delete":
                table.pop(r.values["id"])
            else:
                table[r.values["id"]] = r.values["v"]
    assert len(table) == 39 and table[3] == "new" and 4 not in table


async def test_message_over_max_message_bytes_names_the_row(kafka: KafkaBroker) -> None:
    url = f"kafka://{kafka.bootstrap}/big?protocol=canal-json&max-message-bytes=2000"
    async with open_sink(url, OPTS) as sink:
        await sink.apply([Txn(5, 4, rows=(RowChange.insert(T, {"id": 1, "v": "x"}),))])
        big = RowChange.insert(T, {"id": 2, "v": "y" * 3000})
        with pytest.raises(
            SinkError, match=r"insert of db\.t row \{'id': 2\} in txn 6 is \d+ bytes"
        ) as e:
            await sink.apply([Txn(6, 5, rows=(big,))])
        assert not e.value.retriable
        assert await sink.checkpoint() == 5
