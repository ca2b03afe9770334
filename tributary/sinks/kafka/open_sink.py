"""The Open Protocol Kafka sink: TiCDC's ``kafka://...?protocol=open-protocol`` for changefeeds.

Row events of one topic partition are packed into messages of up to ``max-batch-size`` (16)
events and ``max-message-bytes``, in the order of the upstream (``openproto``); the URL, topics
and dispatchers are shared with canal-json (``cdc_base``). A DDL goes, alone in its message, to
every partition of its table's topic, after everything before it was acknowledged. After each
batch a resolved event at the batch's last commit ts goes to every partition of every topic
written so far: a consumer that keeps events per partition and applies those at or below the
smallest resolved ts of all partitions, in commit ts order, rebuilds the upstream.

A row whose event alone exceeds ``max-message-bytes`` stops the changefeed with an error naming
its table, key and transaction, or, with ``large-message-handle-option=claim-check``, is written
whole to the claim-check storage (``claimcheck``) and sent as its handle key columns with the
file's location in the event key (``"ccl"``), as TiCDC does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from urllib.parse import SplitResult

from tributary.change import RowChange, TableInfo, Txn
from tributary.sinks.kafka import openproto as op
from tributary.sinks.kafka.cdc_base import (
    TopicSink,
    open_claim_check,
    open_producer,
    parse_url,
    partition_of,
)
from tributary.sinks.port import SinkOptions, pending

_Batches = dict[tuple[str, int], op.Batch]


class OpenProtocolSink(TopicSink):
    """Sends row changes, DDLs and resolved events in Open Protocol; ``safe_mode`` has no effect."""

    _columns: dict[TableInfo, op.Columns]

    async def apply(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            todo = pending(txns, self._checkpoint)
            if not todo:
                return
            futures: list[asyncio.Future[object]] = []
            batches: _Batches = {}
            for txn in todo:
                if txn.ddl is not None:
                    await self._flush(batches, futures)
                    await self._settle(futures)
                    await self._send_ddl(txn, futures)
                    await self._settle(futures)
                    continue
                for change in txn.rows:
                    await self._add_row(change, txn, batches, futures)
            await self._flush(batches, futures)
            await self._settle(futures)
            last = todo[-1].commit_ts
            await self._partition_count(self.settings.topic)
            key, value = op.resolved(last)
            for topic, count in self._partitions.items():
                for p in range(count):
                    futures.append(await self._send(topic, p, key, value, None, None))
            await self._settle(futures)
            self._checkpoint = last

    async def _send_ddl(self, txn: Txn, futures: list[asyncio.Future[object]]) -> None:
        ddl = txn.ddl
        assert ddl is not None
        topic = self.settings.topic_of(ddl.schema, ddl.table)
        count = await self._partition_count(topic)
        key, value = op.single(
            op.event_key(txn.commit_ts, ddl.schema, ddl.table, op.DDL), op.ddl_value(ddl)
        )
        for p in range(count):
            futures.append(await self._send(topic, p, key, value, txn, None))

    async def _add_row(
        self, change: RowChange, txn: Txn, batches: _Batches, futures: list[asyncio.Future[object]]
    ) -> None:
        s = self.settings
        t = change.table
        cols = self._columns.get(t)
        if cols is None:
            cols = self._columns[t] = op.Columns.of(t)
        key = op.event_key(txn.commit_ts, t.schema, t.table, op.ROW)
        value = op.row_value(change, cols)
        if op.event_length(key, value) > s.max_message_bytes:
            key, value = await self._large(change, txn, cols, key, value)
        topic = s.topic_of(t.schema, t.table)
        partition = partition_of(s, change, txn.commit_ts, await self._partition_count(topic))
        batch = batches.get((topic, partition))
        if batch is None or not batch.fits(key, value, s.max_message_bytes, s.max_batch_size):
            if batch is not None:
                futures.append(await self._send_batch(topic, partition, batch, txn))
            batch = batches[(topic, partition)] = op.Batch()
        batch.add(key, value)

    async def _large(
        self, change: RowChange, txn: Txn, cols: op.Columns, key: bytes, value: bytes
    ) -> tuple[bytes, bytes]:
        """The claim-check reference for a row too large to send, or the refusal naming it."""
        if self._claim_check is None:
            raise self.too_large(op.event_length(key, value), txn, change, None)
        location = await self._claim_check.write(*op.single(key, value))
        t = change.table
        ref_key = op.event_key(txn.commit_ts, t.schema, t.table, op.ROW, location=location)
        ref_value = op.row_value(change, cols, only_handle=True)
        if op.event_length(ref_key, ref_value) > self.settings.max_message_bytes:
            raise self.too_large(op.event_length(ref_key, ref_value), txn, change, None)
        return ref_key, ref_value

    async def _flush(self, batches: _Batches, futures: list[asyncio.Future[object]]) -> None:
        for (topic, partition), batch in batches.items():
            futures.append(await self._send_batch(topic, partition, batch, None))
        batches.clear()

    async def _send_batch(
        self, topic: str, partition: int, batch: op.Batch, txn: Txn | None
    ) -> asyncio.Future[object]:
        return await self._send(topic, partition, bytes(batch.key), bytes(batch.value), txn, None)


async def open_url(url: SplitResult, options: SinkOptions) -> OpenProtocolSink:
    s = parse_url(url, "open-protocol")
    claim_check = await open_claim_check(s)
    return OpenProtocolSink(s, await open_producer(s), options.safe_mode, claim_check)
