"""aiokafka at the edge: producers and consumers from ``KafkaSettings``, sending in record
batches, reading a partition's last record, and the compacted checkpoint topic of the
exactly-once mode.

Sending: aiokafka keeps one produce request in flight per broker and one batch waiting per
partition, so the batch size bounds the throughput (with 16 KiB batches, its default, about six
2.6 KB messages travel per round trip). The sinks fill record batches of up to
``kafka-batch-size`` themselves (``send_batched``), in message order per partition, and hand
each whole to the producer: one future per batch instead of one per message. Idempotence and
acks=all are unchanged: each batch gets its producer id and sequence numbers when it is drained.

Reading the last record scans backwards in growing windows from the end, because the last
offsets may hold no record a reader sees: transaction markers (exactly-once mode), records of
aborted transactions (skipped under ``read_committed``) or other clusters' checkpoint keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from tributary.sinks.kafka.options import KafkaSettings
from tributary.sinks.port import SinkError

_WINDOW = 16


def unreachable(settings: KafkaSettings, e: BaseException) -> SinkError:
    return SinkError(
        f"kafka sink: cannot reach the brokers {','.join(settings.brokers)}: {e!r}", retriable=True
    )


async def start_producer(settings: KafkaSettings, **extra: Any) -> AIOKafkaProducer:
    """An idempotent producer waiting for all in-sync replicas (tidb-binlog's WaitForAll)."""
    producer = AIOKafkaProducer(
        **settings.client_kwargs(),
        acks="all",
        enable_idempotence=True,
        max_request_size=settings.max_message_size,
        max_batch_size=settings.record_batch_size,
        linger_ms=0,  # a batch goes as soon as the previous request of its broker is answered
        **extra,
    )
    try:
        await producer.start()
    except KafkaError as e:
        await producer.stop()
        raise unreachable(settings, e) from e
    return producer


def record_size(key: bytes | None, value: bytes) -> int:
    """A record's size as the producer checks it against ``max_request_size``."""
    size: int = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, [])
    return size


async def send_batched(
    producer: AIOKafkaProducer,
    topic: str,
    records: Sequence[tuple[int, bytes | None, bytes]],
    futures: list[asyncio.Future[Any] | None],
) -> None:
    """Queue ``(partition, key, value)`` records in record batches, each partition's in order,
    setting ``futures[i]`` to the delivery future of ``records[i]`` (its batch's, shared) as the
    batch is queued: if this raises, the records queued before keep theirs. A full batch is
    queued before the next one of its partition is begun."""
    open_batches: dict[int, tuple[Any, list[int]]] = {}

    async def queue(partition: int) -> None:
        builder, members = open_batches.pop(partition)
        future = await producer.send_batch(builder, topic, partition=partition)
        for i in members:
            futures[i] = future

    for i, (partition, key, value) in enumerate(records):
        entry = open_batches.get(partition)
        if entry is not None:
            if entry[0].append(timestamp=None, key=key, value=value) is not None:
                entry[1].append(i)
                continue
            await queue(partition)  # full: it goes, this record begins the next one
        builder = producer.create_batch()
        builder.append(timestamp=None, key=key, value=value)  # an empty batch takes any record
        open_batches[partition] = (builder, [i])
    for partition in list(open_batches):
        await queue(partition)


class OpenBatches:
    """Record batches being filled, one per partition, kept open across calls: a pipelined
    sink's batches go out full (a 200-transaction drainer batch is about 1.03 record batches of
    512 KiB; handing each call's tail over alone doubled the produce requests, and aiokafka
    keeps one in flight). ``add`` returns the delivery future of the batch taking the record
    (ours, resolved from the producer's once the batch is handed over); a batch is handed over
    when full or by ``seal``, which a caller about to wait for a future must call first.

    If handing a batch over fails, ``seal`` raises, and every open batch's future gets the error
    (nothing is left waiting forever)."""

    def __init__(self, producer: AIOKafkaProducer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self._open: dict[int, tuple[Any, asyncio.Future[Any]]] = {}

    async def add(self, partition: int, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
        entry = self._open.get(partition)
        if entry is not None:
            if entry[0].append(timestamp=None, key=key, value=value) is not None:
                return entry[1]
            await self._hand_over(partition)  # full: it goes, this record begins the next one
        builder = self.producer.create_batch()
        builder.append(timestamp=None, key=key, value=value)  # an empty batch takes any record
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._open[partition] = (builder, future)
        return future

    async def seal(self) -> None:
        for partition in list(self._open):
            await self._hand_over(partition)

    async def _hand_over(self, partition: int) -> None:
        builder, future = self._open.pop(partition)
        try:
            delivery = await self.producer.send_batch(builder, self.topic, partition=partition)
        except BaseException as e:
            error = e if isinstance(e, Exception) else KafkaError(repr(e))
            self.abandon(error)
            _fail(future, error)
            raise
        delivery.add_done_callback(lambda d: _settle_from(future, d))

    def abandon(self, error: Exception) -> None:
        """Drop the open batches, failing their futures with ``error``."""
        for _, future in self._open.values():
            _fail(future, error)
        self._open.clear()


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    """Fail ``future``, marked as seen: whoever waits for it reads the error, and one that
    nobody waits for any more (its batch was given up) is not logged as lost."""
    if not future.done():
        future.set_exception(error)
        future.exception()


def _settle_from(future: asyncio.Future[Any], delivery: asyncio.Future[Any]) -> None:
    if delivery.cancelled():
        _fail(future, KafkaError("the producer dropped the batch"))
    elif (error := delivery.exception()) is not None:
        _fail(future, error)
    elif not future.done():
        future.set_result(delivery.result())


def consumer(settings: KafkaSettings, *, committed: bool = False) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        **settings.client_kwargs(),
        enable_auto_commit=False,
        max_partition_fetch_bytes=settings.max_message_size,
        fetch_max_bytes=settings.max_message_size,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )


async def last_value(
    settings: KafkaSettings,
    topic: str,
    *,
    partition: int = 0,
    committed: bool = False,
    key: bytes | None = None,
) -> bytes | None:
    """The value of the last record of ``topic``'s ``partition`` (with ``key``, if given) a
    reader sees; None if there is none or the topic is absent."""
    wanted: Callable[[Any], bool] = (
        (lambda m: m.value is not None) if key is None else (lambda m: m.key == key)
    )
    c = consumer(settings, committed=committed)
    await c.start()
    try:
        if topic not in await c.topics():
            return None
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        hi = (await c.end_offsets([tp]))[tp]
        begin = (await c.beginning_offsets([tp]))[tp]
        window = _WINDOW
        while hi > begin:
            lo = max(begin, hi - window)
            found = await _scan(c, tp, lo, hi, wanted, settings.ack_timeout)
            if found is not None:
                return found
            hi, window = lo, window * 4
        return None
    finally:
        await c.stop()


async def _scan(
    c: AIOKafkaConsumer,
    tp: TopicPartition,
    lo: int,
    hi: int,
    wanted: Callable[[Any], bool],
    patience: float,
) -> bytes | None:
    """The value of the last wanted record in offsets [lo, hi)."""
    c.seek(tp, lo)
    found: bytes | None = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while await c.position(tp) < hi:
        if loop.time() > deadline:
            raise SinkError(f"kafka sink: cannot read {tp.topic} up to offset {hi}", retriable=True)
        batch = await c.getmany(tp, timeout_ms=500)
        for m in batch.get(tp, []):
            if m.offset < hi and wanted(m):
                found = m.value
    return found


async def ensure_compacted(settings: KafkaSettings, topic: str) -> None:
    """Create ``topic`` (one partition, compacted, replicated on up to 3 brokers) if absent."""
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        if topic in await admin.list_topics():
            return
        brokers = len((await admin.describe_cluster())["brokers"])
        new = NewTopic(
            topic, 1, min(3, max(1, brokers)), topic_configs={"cleanup.policy": "compact"}
        )
        response = await admin.create_topics([new])
        for name, code, *rest in response.topic_errors:
            if code not in (0, TopicAlreadyExistsError.errno):
                raise SinkError(
                    f"kafka sink: cannot create the checkpoint topic {name}: "
                    f"{for_code(code).__name__} {rest}",
                    retriable=bool(for_code(code).retriable),
                )
    finally:
        await admin.close()
