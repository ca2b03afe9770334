"""The canal-json Kafka sink: TiCDC's ``kafka://...?protocol=canal-json`` for changefeeds.

One message per row change or DDL (``canal``); the URL, topics, dispatchers and the refusal of a
message over ``max-message-bytes`` are shared with open-protocol (``cdc_base``). A DDL goes to
partition 0 of its table's topic (TiCDC's rule for canal-json).

``large-message-handle-option=claim-check`` (with ``enable-tidb-extension``): a row whose message
is over ``max-message-bytes`` is written whole to the claim-check storage (``claimcheck``, the
file's ``key`` null) and sent as its handle key columns with the file's location in
``_tidb.claimCheckLocation``, as TiCDC does; a reference still over the limit is refused.

``content-compatible`` (TiCDC v6.5.6+): Canal's full ``mysqlType`` and an UPDATE's ``old`` with
the changed columns only; ``only-output-updated-columns``: the latter alone.

``enable-tidb-extension``: ``_tidb.commitTs`` in every message, and after each batch a
``TIDB_WATERMARK`` at the batch's last commit ts on every partition of every topic written so
far. A consumer that keeps events per partition and applies those at or below the smallest
watermark of all partitions, in commit ts order, rebuilds the upstream (``canal.decode``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from urllib.parse import SplitResult

from tributary.change import RowChange, TableInfo, Txn
from tributary.sinks.kafka.canal import Columns, encode_ddl, encode_row, encode_watermark
from tributary.sinks.kafka.cdc_base import (
    CdcSettings,
    TopicSink,
    open_claim_check,
    open_producer,
    parse_url,
    partition_of,
)
from tributary.sinks.port import SinkOptions, pending

CanalSettings = CdcSettings


class CanalJsonSink(TopicSink):
    """Sends row changes and DDLs as canal-json; ``safe_mode`` has no effect."""

    _columns: dict[TableInfo, Columns]

    async def apply(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            todo = pending(txns, self._checkpoint)
            if not todo:
                return
            futures: list[asyncio.Future[object]] = []
            for txn in todo:
                if txn.ddl is not None:
                    await self._settle(futures)
                    topic = self.settings.topic_of(txn.ddl.schema, txn.ddl.table)
                    await self._partition_count(topic)
                    value = encode_ddl(txn.ddl, txn.commit_ts, extension=self.settings.extension)
                    futures.append(await self._send(topic, 0, None, value, txn, None))
                    await self._settle(futures)
                    continue
                for change in txn.rows:
                    futures.append(await self._send_row(change, txn))
            await self._settle(futures)
            last = todo[-1].commit_ts
            if self.settings.extension:
                await self._partition_count(self.settings.topic)
                mark = encode_watermark(last)
                for topic, count in self._partitions.items():
                    for p in range(count):
                        futures.append(await self._send(topic, p, None, mark, None, None))
                await self._settle(futures)
            self._checkpoint = last

    async def _send_row(self, change: RowChange, txn: Txn) -> asyncio.Future[object]:
        t = change.table
        cols = self._columns.get(t)
        if cols is None:
            s = self.settings
            cols = self._columns[t] = Columns.of(
                t, compatible=s.content_compatible, only_updated=s.only_updated
            )
        value = encode_row(change, txn.commit_ts, cols, extension=self.settings.extension)
        if len(value) > self.settings.max_message_bytes and self._claim_check is not None:
            location = await self._claim_check.write(None, value)
            value = encode_row(change, txn.commit_ts, cols, extension=True, claim_check=location)
        topic = self.settings.topic_of(t.schema, t.table)
        count = await self._partition_count(topic)
        partition = partition_of(self.settings, change, txn.commit_ts, count)
        return await self._send(topic, partition, None, value, txn, change)


async def open_url(url: SplitResult, options: SinkOptions) -> CanalJsonSink:
    s = parse_url(url, "canal-json")
    claim_check = await open_claim_check(s)
    return CanalJsonSink(s, await open_producer(s), options.safe_mode, claim_check)
