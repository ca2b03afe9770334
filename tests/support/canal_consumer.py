"""A canal-json consumer that rebuilds the upstream tables through a sink (TiCDC's recipe).

It reads every partition of a topic, keeps each partition's events until a ``TIDB_WATERMARK``,
and when the smallest watermark of all partitions passes ts W, applies the events at or below W
in commit ts order, one transaction per commit ts (a DDL alone), into the sink. Needs
``enable-tidb-extension=true`` (commit ts and watermarks). A claim-check reference is followed:
the whole message is read from the file its ``_tidb.claimCheckLocation`` names.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tributary.change import RowChange, Txn
from tributary.sinks import Sink
from tributary.sinks.kafka import claimcheck
from tributary.sinks.kafka.canal import CanalEvent, decode


class CanalRebuilder:
    def __init__(self, bootstrap: str, topic: str, sink: Sink) -> None:
        self.bootstrap, self.topic, self.sink = bootstrap, topic, sink
        self.pending: dict[int, list[CanalEvent]] = defaultdict(list)
        self.watermarks: dict[int, int] = {}
        self.applied = 0  # the commit ts applied up to
        self.raw: list[tuple[int, bytes]] = []  # (partition, message) as read
        self.claim_checks: list[str] = []  # the locations followed

    async def run(self, stop: asyncio.Event) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            while self.topic not in await consumer.topics() and not stop.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            parts = await partitions(self.bootstrap, self.topic)
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
                self.watermarks[tp.partition] = 0
            while not stop.is_set():
                got = await consumer.getmany(timeout_ms=200)
                for tp, msgs in got.items():
                    for m in msgs:
                        if m.value is None:
                            continue
                        self.raw.append((tp.partition, m.value))
                        event = decode(m.value)
                        if event.claim_check is not None:
                            self.claim_checks.append(event.claim_check)
                            key, whole = claimcheck.read(event.claim_check)
                            assert key == b""  # canal-json messages have no key
                            event = decode(whole)
                        if event.watermark:
                            self.watermarks[tp.partition] = event.commit_ts
                        else:
                            self.pending[tp.partition].append(event)
                await self._flush()
        finally:
            await consumer.stop()

    async def _flush(self) -> None:
        low = min(self.watermarks.values(), default=0)
        if low <= self.applied:
            return
        ready: list[CanalEvent] = []
        for p, events in self.pending.items():
            ready += [e for e in events if e.commit_ts <= low]
            self.pending[p] = [e for e in events if e.commit_ts > low]
        ready.sort(key=lambda e: e.commit_ts)  # stable: a partition's order is kept
        txns: list[Txn] = []
        rows: list[RowChange] = []
        for i, e in enumerate(ready):
            if e.ddl is not None:
                txns.append(Txn(e.commit_ts, ddl=e.ddl))
                continue
            assert e.row is not None
            rows.append(e.row)
            if i + 1 == len(ready) or ready[i + 1].commit_ts != e.commit_ts:
                txns.append(Txn(e.commit_ts, rows=tuple(rows)))
                rows = []
        if txns:
            await self.sink.apply(txns)
        self.applied = low


async def partitions(bootstrap: str, topic: str) -> set[int]:
    """The partitions of ``topic`` (a producer waits for the topic's metadata; a consumer's
    ``partitions_for_topic`` may not have it yet)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        return set(await producer.partitions_for(topic))
    finally:
        await producer.stop()
