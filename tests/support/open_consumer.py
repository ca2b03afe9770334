"""An Open Protocol consumer that rebuilds the upstream tables through a sink (TiCDC's recipe).

It reads every partition of a topic, unpacks each message into its events (a claim-check
reference is replaced by the event in the file it names), keeps each partition's events until
a resolved event, and when the smallest resolved ts of all partitions passes ts R, applies the
events at or below R in commit ts order, one transaction per commit ts, into the sink. A DDL
arrives once per partition and is applied once.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support.canal_consumer import partitions
from tributary.change import RowChange, Txn
from tributary.sinks import Sink
from tributary.sinks.kafka import claimcheck
from tributary.sinks.kafka import openproto as op


class OpenRebuilder:
    def __init__(self, bootstrap: str, topic: str, sink: Sink) -> None:
        self.bootstrap, self.topic, self.sink = bootstrap, topic, sink
        self.pending: dict[int, list[op.OpenEvent]] = defaultdict(list)
        self.resolved: dict[int, int] = {}
        self.applied = 0  # the commit ts applied up to
        self.raw: list[tuple[int, bytes, bytes]] = []  # (partition, key, value) as read
        self.claim_checks: list[str] = []  # the locations followed

    async def run(self, stop: asyncio.Event) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            while self.topic not in await consumer.topics() and not stop.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            tps = [
                TopicPartition(self.topic, p)
                for p in sorted(await partitions(self.bootstrap, self.topic))
            ]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
                self.resolved[tp.partition] = 0
            while not stop.is_set():
                got = await consumer.getmany(timeout_ms=200)
                for tp, msgs in got.items():
                    for m in msgs:
                        assert m.key is not None and m.value is not None
                        self.raw.append((tp.partition, m.key, m.value))
                        self._take(tp.partition, m.key, m.value)
                await self._flush()
        finally:
            await consumer.stop()

    def _take(self, partition: int, key: bytes, value: bytes) -> None:
        for event in op.decode(key, value):
            if event.kind == op.RESOLVED:
                self.resolved[partition] = event.commit_ts
                continue
            if event.claim_check:
                self.claim_checks.append(event.claim_check)
                (event,) = op.decode(*claimcheck.read(event.claim_check))
            self.pending[partition].append(event)

    async def _flush(self) -> None:
        low = min(self.resolved.values(), default=0)
        if low <= self.applied:
            return
        ready: list[op.OpenEvent] = []
        for p, events in self.pending.items():
            ready += [e for e in events if e.commit_ts <= low]
            self.pending[p] = [e for e in events if e.commit_ts > low]
        ready.sort(key=lambda e: e.commit_ts)  # stable: a partition's order is kept
        txns: list[Txn] = []
        rows: list[RowChange] = []
        seen_ddl: set[tuple[int, str]] = set()
        for i, e in enumerate(ready):
            if e.ddl is not None:
                if (e.commit_ts, e.ddl.query) not in seen_ddl:
                    seen_ddl.add((e.commit_ts, e.ddl.query))
                    txns.append(Txn(e.commit_ts, ddl=e.ddl))
                continue
            assert e.row is not None
            rows.append(e.row)
            nxt = ready[i + 1] if i + 1 < len(ready) else None
            if nxt is None or nxt.commit_ts != e.commit_ts or nxt.ddl is not None:
                txns.append(Txn(e.commit_ts, rows=tuple(rows)))
                rows = []
        if txns:
            await self.sink.apply(txns)
        self.applied = low
