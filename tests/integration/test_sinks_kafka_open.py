"""The Open Protocol sink on a real broker: events batched per partition under max-batch-size,
DDL on every partition, resolved events on every partition, the table rebuilt by a consumer; a
row over max-message-bytes refused with the row named, or sent by claim check to a file."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support.canal_consumer import partitions
from tests.support.open_consumer import OpenRebuilder
from tests.support.waits import eventually
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from tests.support.kafka import KafkaBroker

pytest_plugins = ["tests.support.kafka"]

T = TableInfo.build("db", "t", [("id", "bigint"), ("v", "varchar(64)"), ("doc", "blob")], ["id"])
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


async def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await partitions(bootstrap, topic)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out: list[tuple[int, bytes, bytes]] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                out += [(tp.partition, m.key or b"", m.value or b"") for m in msgs]
        return out
    finally:
        await consumer.stop()


def event_keys(key: bytes) -> list[dict[str, object]]:
    """The event keys of a message, unpacked by hand from the documented layout."""
    assert struct.unpack(">q", key[:8]) == (1,)
    out, pos = [], 8
    while pos < len(key):
        (n,) = struct.unpack(">q", key[pos : pos + 8])
        out.append(json.loads(key[pos + 8 : pos + 8 + n]))
        pos += 8 + n
    return out


async def rebuild(
    bootstrap: str, topic: str, upto: int
) -> tuple[dict[object, object], OpenRebuilder]:
    recorder = Recorder()
    stop = asyncio.Event()
    consumer = OpenRebuilder(bootstrap, topic, recorder)
    task = asyncio.create_task(consumer.run(stop), name="open-consumer")
    try:
        await eventually(lambda: consumer.applied >= upto or task.done(), 60)
    finally:
        stop.set()
        await task
    table: dict[object, object] = {}
    for t in recorder.txns:
        for r in t.rows:
            if r.kind.value == "delete":
                table.pop(r.values["id"])
            else:
                table[r.values["id"]] = (r.values["v"], r.values["doc"])
    return table, consumer


async def test_batches_ddl_resolved_and_rebuild(kafka: KafkaBroker) -> None:
    url = (
        f"kafka://{kafka.bootstrap}/cdc-open?protocol=open-protocol&partition-num=3"
        "&dispatcher=index-value&max-batch-size=4&kafka-version=2.4.0"
    )
    async with open_sink(url, OPTS) as sink:
        await sink.apply([Txn(11, ddl=Ddl("db", "CREATE TABLE t (id BIGINT PRIMARY KEY)", "t"))])
        rows = tuple(
            RowChange.insert(T, {"id": i, "v": f"v{i}", "doc": b"\x00\xff"}) for i in range(40)
        )
        await sink.apply([Txn(20, 19, rows=rows)])
        upd = RowChange.update(
            T, {"id": 3, "v": "v3", "doc": None}, {"id": 3, "v": "new", "doc": None}
        )
        await sink.apply(
            [Txn(30, 29, rows=(upd, RowChange.delete(T, {"id": 4, "v": "v4", "doc": None})))]
        )
        assert await sink.checkpoint() == 30
    got = await read_all(kafka.bootstrap, "cdc-open")
    keys = [(p, event_keys(k)) for p, k, _ in got]
    assert {p for p, _ in keys} == {0, 1, 2}
    ddl = [(p, ks) for p, ks in keys if ks[0]["t"] == 2]
    assert sorted(p for p, _ in ddl) == [0, 1, 2]  # a DDL goes to every partition, alone
    assert all(ks == [{"ts": 11, "scm": "db", "tbl": "t", "t": 2}] for _, ks in ddl)
    rows_msgs = [ks for _, ks in keys if ks[0]["t"] == 1]
    assert max(len(ks) for ks in rows_msgs) == 4  # batched, up to max-batch-size
    assert sum(len(ks) for ks in rows_msgs) == 42
    resolved = {(p, ks[0]["ts"]) for p, ks in keys if ks[0]["t"] == 3}
    assert {(p, 30) for p in range(3)} <= resolved
    table, _ = await rebuild(kafka.bootstrap, "cdc-open", 30)
    assert len(table) == 39 and table[3] == ("new", None) and 4 not in table
    assert table[7] == ("v7", b"\x00\xff")


async def test_large_row_refused_naming_it(kafka: KafkaBroker) -> None:
    url = f"kafka://{kafka.bootstrap}/big-open?protocol=open-protocol&max-message-bytes=2000"
    async with open_sink(url, OPTS) as sink:
        await sink.apply([Txn(5, 4, rows=(RowChange.insert(T, {"id": 1, "v": "x", "doc": None}),))])
        big = RowChange.insert(T, {"id": 2, "v": "y", "doc": b"z" * 3000})
        with pytest.raises(
            SinkError, match=r"insert of db\.t row \{'id': 2\} in txn 6 is \d+ bytes"
        ) as e:
            await sink.apply([Txn(6, 5, rows=(big,))])
        assert not e.value.retriable and "claim-check" in str(e.value)
        assert await sink.checkpoint() == 5


async def test_large_row_goes_by_claim_check(kafka: KafkaBroker, tmp_path: Path) -> None:
    store = tmp_path / "claims"
    url = (
        f"kafka://{kafka.bootstrap}/cc-open?protocol=open-protocol&max-message-bytes=2000"
        f"&large-message-handle-option=claim-check&claim-check-storage-uri=file://{store}"
    )
    big = RowChange.insert(T, {"id": 2, "v": "y", "doc": b"z" * 3000})
    async with open_sink(url, OPTS) as sink:
        small = RowChange.insert(T, {"id": 1, "v": "x", "doc": None})
        await sink.apply([Txn(5, 4, rows=(small,)), Txn(6, 5, rows=(big,))])
        assert await sink.checkpoint() == 6
    (file,) = store.iterdir()
    assert file.name.endswith(".json")
    got = await read_all(kafka.bootstrap, "cc-open")
    assert all(len(k) + len(v) <= 2000 for _, k, v in got)
    refs = [ek for _, k, _ in got for ek in event_keys(k) if "ccl" in ek]
    assert refs == [{"ts": 6, "scm": "db", "tbl": "t", "t": 1, "ccl": f"file://{file}"}]
    table, consumer = await rebuild(kafka.bootstrap, "cc-open", 6)
    assert consumer.claim_checks == [f"file://{file}"]
    assert table == {1: ("x", None), 2: ("y", b"z" * 3000)}
