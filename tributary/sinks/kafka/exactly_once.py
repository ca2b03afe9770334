"""The exactly-once Kafka sink (``kafka-exactly-once = true``): batch and checkpoint in one Kafka
transaction.

Each batch (at most ``kafka-max-messages`` messages) is one Kafka transaction of a transactional
producer: its messages, then the checkpoint record (key: the upstream cluster id, value: the
checkpoint JSON of ``tidb_binlog.checkpoint``) in the compacted topic ``<topic>_checkpoint``. A
consumer reading with ``isolation_level=read_committed`` sees the batch and the checkpoint
together or neither. The transactional id is the same across restarts: a drainer that starts
again fences the producer of the one it replaces (a SIGKILLed process, or a zombie still
running), which aborts the transaction that one left open; its checkpoint, read back committed,
is exactly where the committed data ends.

Example: batches [t1 t2] and [t3 t4]; the drainer is SIGKILLed after t3 was written but before
the commit of the second. A reader of committed messages sees t1 t2; the new drainer's producer
aborts t3, the checkpoint says t2, the drainer resends t3 t4 in a new transaction: t1 t2 t3 t4,
each once. The cost: one transaction marker per partition touched and a checkpoint record per
batch, and readers see a batch only once its transaction commits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, ProducerFenced

from tributary.change import Txn
from tributary.sinks.checkpoint import CheckpointRecord
from tributary.sinks.kafka.client import (
    ensure_compacted,
    last_value,
    record_size,
    send_batched,
    start_producer,
)
from tributary.sinks.kafka.options import KafkaSettings
from tributary.sinks.kafka.refusal import too_large
from tributary.sinks.kafka.routing import Message, route
from tributary.sinks.port import SinkError, pending

log = logging.getLogger(__name__)


class ExactlyOnceKafkaSink:
    """Commits each batch with its checkpoint in one Kafka transaction; ``safe_mode`` is unused."""

    def __init__(self, settings: KafkaSettings, safe_mode: bool):
        self.settings = settings
        self.safe_mode = safe_mode
        self._producer: AIOKafkaProducer | None = None
        self._checkpoint: int | None = None
        self._key = str(settings.cluster_id).encode()
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls, settings: KafkaSettings, *, safe_mode: bool = False
    ) -> ExactlyOnceKafkaSink:
        sink = cls(settings, safe_mode)
        try:
            await ensure_compacted(settings, settings.checkpoint_topic)
            await sink._restart()
        except KafkaError as e:
            await sink.close()
            raise SinkError(
                f"kafka sink: cannot open {settings.topic}: {e!r}", retriable=True
            ) from e
        except BaseException:
            await sink.close()
            raise
        log.info(
            "kafka sink %s topic %s (exactly once, transactional id %s) at checkpoint %s",
            ",".join(settings.brokers),
            settings.topic,
            settings.txn_id,
            sink._checkpoint,
        )
        return sink

    async def _restart(self) -> None:
        """A new producer (fencing any older one with our transactional id, which aborts its
        open transaction), then the committed checkpoint."""
        await self._stop_producer()
        self._producer = await start_producer(
            self.settings,
            transactional_id=self.settings.txn_id,
            transaction_timeout_ms=max(60000, int(self.settings.ack_timeout * 2000)),
        )
        value = await last_value(
            self.settings, self.settings.checkpoint_topic, committed=True, key=self._key
        )
        self._checkpoint = CheckpointRecord.from_json(value.decode()).commit_ts if value else None

    async def checkpoint(self) -> int | None:
        return self._checkpoint

    async def apply(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            if self._producer is None:
                await self._reopen()
            todo = pending(txns, self._checkpoint)
            if not todo:
                return
            partitions = await self._partitions()
            chunk: list[Message] = []
            for t in todo:
                chunk += route(t, self.settings.partition_by, self.settings.message_per, partitions)
                if len(chunk) >= self.settings.max_messages:
                    await self._commit(chunk, t)
                    chunk = []
            if chunk or self._checkpoint != todo[-1].commit_ts:
                await self._commit(chunk, todo[-1])

    async def _reopen(self) -> None:
        try:
            await self._restart()
        except KafkaError as e:
            await self._stop_producer()
            raise SinkError(
                f"kafka sink: cannot restart the producer: {e!r}", retriable=True
            ) from e

    async def _partitions(self) -> int:
        if self.settings.partition_by == "fixed":
            return 1
        assert self._producer is not None
        try:
            found = await self._producer.partitions_for(self.settings.topic)
        except KafkaError as e:
            raise SinkError(
                f"kafka sink: no metadata for topic {self.settings.topic}: {e!r}", retriable=True
            ) from e
        return len(found)

    async def _commit(self, messages: list[Message], last: Txn) -> None:
        """One Kafka transaction: ``messages`` and the checkpoint ``last.commit_ts``."""
        producer = self._producer
        assert producer is not None
        record = CheckpointRecord(last.commit_ts, schema_version=last.schema_version)
        topic, timeout = self.settings.topic, self.settings.ack_timeout
        futures: list[asyncio.Future[object] | None] = [None] * len(messages)
        try:
            for m in messages:
                if record_size(m.key, m.value) > self.settings.max_message_size:
                    error = MessageSizeTooLargeError("kafka-max-message-size")
                    raise too_large(self.settings, m.txn, m.value, error)
            await producer.begin_transaction()
            records = [(m.partition, m.key, m.value) for m in messages]
            await send_batched(producer, topic, records, futures)
            mark = await producer.send(
                self.settings.checkpoint_topic,
                record.to_json().encode(),
                key=self._key,
                partition=0,
            )
            sent = list(dict.fromkeys(f for f in futures if f is not None))  # one per batch
            await asyncio.wait_for(asyncio.gather(mark, *sent), timeout)
            await asyncio.wait_for(producer.commit_transaction(), timeout)
        except BaseException as e:
            await self._abandon()
            if isinstance(e, SinkError | asyncio.CancelledError):
                raise
            for m, f in zip(messages, futures, strict=True):
                if f is not None and f.done() and not f.cancelled():
                    error = f.exception()
                    if isinstance(error, MessageSizeTooLargeError):
                        batch = [n for n, g in zip(messages, futures, strict=True) if g is f]
                        raise too_large(self.settings, m.txn, m.value, error, batch) from e
            if isinstance(e, ProducerFenced):
                raise SinkError(
                    f"kafka sink: another producer with transactional id {self.settings.txn_id} "
                    f"took over topic {topic} (a second drainer?)"
                ) from e
            if not isinstance(e, KafkaError | TimeoutError):
                raise
            raise SinkError(
                f"kafka sink: the transaction up to txn {last.commit_ts} did not commit "
                f"(aborted; retried from the committed checkpoint): {e!r}",
                retriable=True,
            ) from e
        self._checkpoint = last.commit_ts

    async def _abandon(self) -> None:
        """Drop the producer; the next batch starts a new one, which aborts what this one left
        open (an abort request here could hang on a dead broker)."""
        await self._stop_producer()

    async def close(self) -> None:
        await self._stop_producer()

    async def _stop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            await asyncio.wait_for(producer.stop(), self.settings.ack_timeout)
        except (TimeoutError, KafkaError):
            log.warning("kafka sink: producer closed with a transaction open (it is aborted)")
