"""The Kafka sink: tidb-binlog's ``kafka`` output, one secondary binlog per transaction or DDL.

URL ``kafka://HOST:PORT[,HOST:PORT]/[TOPIC]?kafka-version=&kafka-max-messages=1024&
kafka-max-message-size=1GiB&kafka-client-id=tidb_binlog&ack-timeout=30``; the topic defaults to
``<cluster-id>_obinlog`` as tidb-binlog's. Every message goes to partition 0 with no key, in commit
order, from an idempotent producer with acks from all in-sync replicas (tidb-binlog's
``WaitForAll``). ``kafka-max-messages`` is how many messages are in flight before the sink waits
for their acks (sarama's ``Flush.MaxMessages``); ``kafka-version`` is accepted and ignored (the
client negotiates the protocol with the broker).

Checkpoint: the commit ts of the last message the broker acknowledged. On open it is read from
the topic itself (the commit ts of the last message of partition 0), so the topic, not a file,
says what was delivered: after a crash between the broker's write and our checkpoint save, nothing
is sent twice. A batch that fails part way (broker gone, ack timeout) leaves some of its messages
in the topic: the sink reads the topic's tail again before the next batch, and ``pending`` drops
what is there. Example: batch [t1 t2 t3], t1 and t2 acked, then the broker dies: apply raises
(retriable); once the broker is back the drainer retries [t1 t2 t3], the tail says t2, t3 is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, unquote

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from tributary.change import Txn
from tributary.settings.parsers import parse_byte_size
from tributary.sinks.kafka.secondary import commit_ts_of, encode_txn
from tributary.sinks.port import SinkError, SinkOptions, pending

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_SIZE = 1 << 30  # tidb-binlog's kafka-max-message-size
DEFAULT_MAX_MESSAGES = 1024
DEFAULT_CLIENT_ID = "tidb_binlog"
DEFAULT_ACK_TIMEOUT = 30.0  # seconds; tidb-binlog fails when no ack came for 30 s
PARTITION = 0


def default_topic(cluster_id: int) -> str:
    return f"{cluster_id}_obinlog"


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    brokers: tuple[str, ...]
    topic: str
    max_messages: int = DEFAULT_MAX_MESSAGES
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    client_id: str = DEFAULT_CLIENT_ID
    ack_timeout: float = DEFAULT_ACK_TIMEOUT
    kafka_version: str = ""

    @property
    def bootstrap(self) -> list[str]:
        return list(self.brokers)


async def _start_producer(settings: KafkaSettings) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        client_id=settings.client_id,
        acks="all",
        enable_idempotence=True,
        max_request_size=settings.max_message_size,
        request_timeout_ms=int(settings.ack_timeout * 1000),
        linger_ms=0,
    )
    try:
        await producer.start()
    except KafkaError as e:
        await producer.stop()
        raise SinkError(
            f"kafka sink: cannot reach the brokers {','.join(settings.brokers)}: {e!r}",
            retriable=True,
        ) from e
    return producer


class KafkaSink:
    """Sends batches as secondary binlogs; ``safe_mode`` has no effect (kept for the protocol)."""

    def __init__(self, settings: KafkaSettings, producer: AIOKafkaProducer, safe_mode: bool):
        self.settings = settings
        self._producer = producer
        self._checkpoint: int | None = None
        self._stale = True  # the checkpoint must be read from the topic before the next batch
        self._broken = False  # the producer gave up on a message: it is replaced
        self._inflight: list[tuple[Txn, bytes, asyncio.Future[object]]] = []
        self._lock = asyncio.Lock()
        self.safe_mode = safe_mode

    @classmethod
    async def open(cls, settings: KafkaSettings, *, safe_mode: bool = False) -> KafkaSink:
        sink = cls(settings, await _start_producer(settings), safe_mode)
        try:
            await sink._refresh()
        except BaseException:
            await sink.close()
            raise
        log.info(
            "kafka sink %s topic %s opened at checkpoint %s",
            ",".join(settings.brokers),
            settings.topic,
            sink._checkpoint,
        )
        return sink

    async def checkpoint(self) -> int | None:
        return self._checkpoint

    async def _refresh(self) -> None:
        """Read the checkpoint from the commit ts of the topic's last message."""
        try:
            ts = await last_commit_ts(self.settings)
        except KafkaError as e:
            raise SinkError(
                f"kafka sink: cannot read the tail of topic {self.settings.topic}: {e!r}",
                retriable=True,
            ) from e
        if ts is not None and (self._checkpoint is None or ts > self._checkpoint):
            self._checkpoint = ts
        self._stale = False

    async def apply(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            await self._settle()  # what a failed batch left in flight, then the topic's tail
            todo = pending(txns, self._checkpoint)
            if not todo:
                return
            messages = [(t, m) for t in todo if (m := encode_txn(t)) is not None]
            step = self.settings.max_messages
            for i in range(0, len(messages), step):
                await self._send(messages[i : i + step])
                await self._settle()
            self._checkpoint = todo[-1].commit_ts

    async def _send(self, messages: list[tuple[Txn, bytes]]) -> None:
        """Queue ``messages`` in order; each is in ``_inflight`` until ``_settle`` sees its ack."""
        for txn, value in messages:
            try:
                future = await self._producer.send(self.settings.topic, value, partition=PARTITION)
            except MessageSizeTooLargeError as e:
                self._stale = True
                raise self._too_large(txn, value, e) from e
            except KafkaError as e:
                raise SinkError(
                    f"kafka sink: cannot send txn {txn.commit_ts}: {e!r}", retriable=True
                ) from e
            self._inflight.append((txn, value, future))

    async def _settle(self) -> None:
        """Wait for the acks of the messages in flight, moving the checkpoint over each.

        The producer keeps retrying what it could not deliver (a broker restart), so a retried
        batch waits for those first instead of sending them twice; a message the producer gave up
        on may or may not be in the topic, so the checkpoint is then read from the topic again.
        """
        if self._stale and not self._inflight:
            if self._broken:  # its idempotence sequence has a gap: a new producer id
                await self._stop_producer()
                self._producer = await _start_producer(self.settings)
                self._broken = False
            await self._refresh()
        if not self._inflight:
            return
        timeout = self.settings.ack_timeout
        await asyncio.wait([f for _, _, f in self._inflight], timeout=timeout)
        while self._inflight:
            txn, value, future = self._inflight[0]
            if not future.done():
                raise SinkError(
                    f"kafka sink: no ack for txn {txn.commit_ts} within {timeout:g} s "
                    f"(topic {self.settings.topic}); still trying",
                    retriable=True,
                )
            error = future.exception()
            if error is not None:
                self._inflight.clear()
                self._stale = self._broken = True
                if isinstance(error, MessageSizeTooLargeError):
                    raise self._too_large(txn, value, error) from error
                raise SinkError(
                    f"kafka sink: txn {txn.commit_ts} not delivered: {error!r}",
                    retriable=not isinstance(error, KafkaError) or bool(error.retriable),
                ) from error
            self._inflight.pop(0)
            self._checkpoint = txn.commit_ts

    def _too_large(self, txn: Txn, value: bytes, e: BaseException) -> SinkError:
        return SinkError(
            f"kafka sink: the message of txn {txn.commit_ts} (start ts {txn.start_ts}, "
            f"{len(txn.rows)} row changes) is {len(value)} bytes, over the message size limit of "
            f"topic {self.settings.topic} (raise the broker's message.max.bytes or the topic's "
            f"max.message.bytes, and kafka-max-message-size): {e!r}"
        )

    async def close(self) -> None:
        await self._stop_producer()

    async def _stop_producer(self) -> None:
        try:  # stop() flushes what is in flight: bounded, a dead broker must not hang shutdown
            await asyncio.wait_for(self._producer.stop(), self.settings.ack_timeout)
        except TimeoutError:
            log.warning("kafka sink: closed with messages in flight (they are resent)")


async def last_commit_ts(settings: KafkaSettings) -> int | None:
    """The commit ts of the last message of partition 0; None if the topic is empty or absent."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        client_id=settings.client_id,
        enable_auto_commit=False,
        max_partition_fetch_bytes=settings.max_message_size,
        fetch_max_bytes=settings.max_message_size,
        request_timeout_ms=int(settings.ack_timeout * 1000),
    )
    await consumer.start()
    try:
        if settings.topic not in await consumer.topics():
            return None
        tp = TopicPartition(settings.topic, PARTITION)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        begin = (await consumer.beginning_offsets([tp]))[tp]
        if end <= begin:
            return None
        consumer.seek(tp, end - 1)
        while True:
            batch = await consumer.getmany(tp, timeout_ms=int(settings.ack_timeout * 1000))
            if not batch:
                raise SinkError(f"kafka sink: cannot fetch the last message of {settings.topic}")
            msgs = batch[tp]
            if msgs and msgs[-1].value is not None:
                return commit_ts_of(msgs[-1].value)
    finally:
        await consumer.stop()


_OPTIONS = {"kafka-version", "kafka-max-messages", "kafka-max-message-size", "kafka-client-id"}


def parse_url(url: SplitResult, cluster_id: int) -> KafkaSettings:
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    unknown = sorted(set(query) - _OPTIONS - {"ack-timeout"})
    if unknown:
        known = sorted(_OPTIONS | {"ack-timeout"})
        raise SinkError(f"kafka sink URL: unknown options {unknown}; known: {known}")
    brokers = tuple(b for b in url.netloc.split(",") if b)
    if not brokers:
        raise SinkError(f"kafka sink URL names no broker: {url.geturl()!r}")
    topic = unquote(url.path.strip("/")) or default_topic(cluster_id)
    try:
        settings = KafkaSettings(
            brokers,
            topic,
            max_messages=int(query.get("kafka-max-messages", DEFAULT_MAX_MESSAGES)),
            max_message_size=parse_byte_size(
                query.get("kafka-max-message-size", DEFAULT_MAX_MESSAGE_SIZE)
            ),
            client_id=query.get("kafka-client-id", DEFAULT_CLIENT_ID) or DEFAULT_CLIENT_ID,
            ack_timeout=float(query.get("ack-timeout", DEFAULT_ACK_TIMEOUT)),
            kafka_version=query.get("kafka-version", ""),
        )
    except ValueError as e:
        raise SinkError(f"kafka sink URL {url.geturl()!r}: {e}") from e
    if settings.max_messages < 1 or settings.max_message_size < 1 or settings.ack_timeout <= 0:
        raise SinkError(
            "kafka sink URL: kafka-max-messages, kafka-max-message-size and ack-timeout "
            "must be positive"
        )
    return settings


async def open_url(url: SplitResult, options: SinkOptions) -> KafkaSink:
    """The ``kafka://`` opener for ``sinks.registry``."""
    return await KafkaSink.open(parse_url(url, options.cluster_id), safe_mode=options.safe_mode)
