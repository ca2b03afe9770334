"""The Kafka sink: tidb-binlog's ``kafka`` output, one secondary binlog per transaction or DDL.

The URL and its options are in ``options``; ``kafka-exactly-once = true`` opens the transactional
sink of ``exactly_once`` instead of this one. By default every message goes to partition 0 with no
key, in commit order, from an idempotent producer with acks from all in-sync replicas
(tidb-binlog's ``WaitForAll``). ``kafka-max-messages`` is how many messages are in flight before
the sink waits for their acks (sarama's ``Flush.MaxMessages``); ``kafka-version`` is accepted and
ignored (the client negotiates the protocol with the broker).

Checkpoint: the commit ts of the last message the broker acknowledged. On open it is read from
the topic itself (the commit ts of the last message of partition 0), so the topic, not a file,
says what was delivered: after a crash between the broker's write and our checkpoint save, nothing
is sent twice. A batch that fails part way (broker gone, ack timeout) leaves some of its messages
in the topic: the sink reads the topic's tail again before the next batch, and ``pending`` drops
what is there. Example: batch [t1 t2 t3], t1 and t2 acked, then the broker dies: apply raises
(retriable); once the broker is back the drainer retries [t1 t2 t3], the tail says t2, t3 is sent.

With ``kafka-partition-by`` table/key or ``kafka-message-per = row`` the tail of one partition
no longer says what was delivered (another partition may lag, a transaction may be cut between
messages): the sink has no checkpoint of its own on open, the drainer resumes from its savepoint
file, and a retried batch is sent again whole: at least once, as tidb-binlog's anchors are.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from typing import NoReturn
from urllib.parse import SplitResult

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from tributary.change import Txn
from tributary.sinks.kafka.client import OpenBatches, last_value, record_size, start_producer
from tributary.sinks.kafka.exactly_once import ExactlyOnceKafkaSink
from tributary.sinks.kafka.options import KafkaSettings, parse_url
from tributary.sinks.kafka.refusal import too_large
from tributary.sinks.kafka.routing import Message, route
from tributary.sinks.kafka.secondary import commit_ts_of
from tributary.sinks.port import Sink, SinkError, SinkOptions, pending

log = logging.getLogger(__name__)

__all__ = ["KafkaSettings", "KafkaSink", "last_commit_ts", "open_url", "parse_url", "too_large"]

# a queued message (None: a trailing marker), its delivery future (None until queued, and for a
# marker), the commit ts the checkpoint moves to once it is acknowledged (None: not yet)
_Entry = tuple[Message | None, asyncio.Future[object] | None, int | None]
# transactions encoded between two yields to the event loop, so the producer hands full record
# batches to the broker and reads its acks while the rest of a batch is encoded
_YIELD_EVERY = 16


class KafkaSink:
    """Sends batches as secondary binlogs; ``safe_mode`` has no effect (kept for the protocol).

    Pipelined (``tributary.sinks.port.Pipelined``): ``submit`` queues a batch and returns while
    its acks are outstanding, ``flush`` waits for them, ``apply`` is both. Each queued message is
    an entry of ``_inflight`` in send order with the commit ts the checkpoint may move to once
    it and everything before it are acknowledged: the transaction's on its last message, None
    on the others (a transaction cut into several messages counts only when all are in), and
    an entry without a message or future for a checkpoint-only marker. Messages go into record
    batches kept open across batches (``client.OpenBatches``), handed over when full or when
    the sink is about to wait for an ack.
    """

    def __init__(self, settings: KafkaSettings, producer: AIOKafkaProducer, safe_mode: bool):
        self.settings = settings
        self._producer = producer
        self._batches = OpenBatches(producer, settings.topic)
        self._checkpoint: int | None = None
        self._stale = True  # the checkpoint must be read from the topic before the next batch
        self._broken = False  # the producer gave up on a message: it is replaced
        self._inflight: deque[_Entry] = deque()
        self._queued = 0  # the commit ts of the last transaction queued whole (while in flight)
        self._lock = asyncio.Lock()
        self.safe_mode = safe_mode

    @classmethod
    async def open(cls, settings: KafkaSettings, *, safe_mode: bool = False) -> KafkaSink:
        producer = await start_producer(settings)
        sink = cls(settings, producer, safe_mode)
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
        """Read the checkpoint from the commit ts of the topic's last message (in the default
        layout only; the others leave it to the drainer's savepoint)."""
        self._stale = False
        if not self.settings.single_stream:
            return
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
            await self._submit(txns)
            await self._settle(0)

    async def submit(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            await self._submit(txns)
            await self._settle(len(self._inflight))  # what is already acked moves the checkpoint

    async def flush(self) -> None:
        async with self._lock:
            await self._settle(0)

    async def _submit(self, txns: Sequence[Txn]) -> None:
        if self._stale:  # a batch failed: its messages settle, then the topic's tail is read
            await self._settle(0)
            await self._recover()
        todo = pending(txns, self._queued if self._inflight else self._checkpoint)
        if not todo:
            return
        partitions = await self._partitions()
        by, per = self.settings.partition_by, self.settings.message_per
        step = self.settings.max_messages
        for n, t in enumerate(todo, 1):
            messages = list(route(t, by, per, partitions))
            if len(self._inflight) + len(messages) > step:  # at most kafka-max-messages in flight
                await self._settle(max(0, step - len(messages)))
            await self._send(messages, t.commit_ts)
            if n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)

    async def _recover(self) -> None:
        """After a failed batch, with nothing in flight: a new producer if the old one gave up on
        a message (its idempotence sequence has a gap), then the checkpoint from the topic."""
        if self._broken:
            await self._stop_producer()
            self._producer = await start_producer(self.settings)
            self._batches = OpenBatches(self._producer, self.settings.topic)
            self._broken = False
        await self._refresh()

    async def _partitions(self) -> int:
        if self.settings.partition_by == "fixed":
            return 1
        try:
            return len(await self._producer.partitions_for(self.settings.topic))
        except KafkaError as e:
            raise SinkError(
                f"kafka sink: no metadata for topic {self.settings.topic}: {e!r}", retriable=True
            ) from e

    async def _send(self, messages: list[Message], commit_ts: int) -> None:
        """Queue the messages of the transaction ``commit_ts`` in order (none: a marker); each is
        in ``_inflight`` until ``_settle`` sees its ack, the last one carrying ``commit_ts``."""
        limit = self.settings.max_message_size
        for m in messages:
            if record_size(m.key, m.value) > limit:
                self._stale = True
                raise too_large(
                    self.settings,
                    m.txn,
                    m.value,
                    MessageSizeTooLargeError("kafka-max-message-size"),
                )
        if not messages:
            self._inflight.append((None, None, commit_ts))
        last = len(messages) - 1
        for i, m in enumerate(messages):
            try:
                f = await self._batches.add(m.partition, m.key, m.value)
            except KafkaError as e:
                self._stale = True
                raise SinkError(
                    f"kafka sink: cannot send txn {commit_ts}: {e!r}", retriable=True
                ) from e
            self._inflight.append((m, f, commit_ts if i == last else None))
        self._queued = commit_ts

    async def _seal(self) -> None:
        """Hand the open record batches over: about to wait for acks."""
        try:
            await self._batches.seal()
        except KafkaError as e:
            self._stale = True
            raise SinkError(f"kafka sink: cannot send: {e!r}", retriable=True) from e

    async def _settle(self, keep: int) -> None:
        """Wait for acks until at most ``keep`` messages are in flight, moving the checkpoint
        over the acknowledged ones in order.

        The producer keeps retrying what it could not deliver (a broker restart), so a retried
        batch waits for those first instead of sending them twice; a message the producer gave
        up on may or may not be in the topic, so the checkpoint is then read from the topic again
        before the next batch.
        """
        timeout = self.settings.ack_timeout
        inflight = self._inflight
        while inflight:
            message, future, ts = inflight[0]
            if future is not None and not future.done():
                if len(inflight) <= keep:
                    return
                await self._seal()
                await asyncio.wait([future], timeout=timeout)
                if not future.done():
                    assert message is not None
                    raise SinkError(
                        f"kafka sink: no ack for txn {message.txn.commit_ts} within "
                        f"{timeout:g} s (topic {self.settings.topic}); still trying",
                        retriable=True,
                    )
            error = None if future is None else future.exception()
            if error is not None:
                assert message is not None
                self._fail(message, future, error)
            inflight.popleft()
            if ts is not None:
                self._checkpoint = ts

    def _fail(self, message: Message, future: object, error: BaseException) -> NoReturn:
        batch = [m for m, f, _ in self._inflight if f is future and m is not None]
        self._inflight.clear()
        self._batches.abandon(KafkaError("an earlier batch failed"))
        self._stale = self._broken = True
        txn, value = message.txn, message.value
        if isinstance(error, MessageSizeTooLargeError):
            raise too_large(self.settings, txn, value, error, batch) from error
        raise SinkError(
            f"kafka sink: txn {txn.commit_ts} not delivered: {error!r}",
            retriable=not isinstance(error, KafkaError) or bool(error.retriable),
        ) from error

    async def close(self) -> None:
        self._batches.abandon(KafkaError("the sink closed"))  # not acknowledged: resent later
        await self._stop_producer()

    async def _stop_producer(self) -> None:
        try:  # stop() flushes what is in flight: bounded, a dead broker must not hang shutdown
            await asyncio.wait_for(self._producer.stop(), self.settings.ack_timeout)
        except TimeoutError:
            log.warning("kafka sink: closed with messages in flight (they are resent)")


async def last_commit_ts(settings: KafkaSettings) -> int | None:
    """The commit ts of the last message of partition 0 (committed ones in exactly-once mode);
    None if the topic is empty or absent."""
    value = await last_value(settings, settings.topic, committed=settings.exactly_once)
    return None if value is None else commit_ts_of(value)


async def open_url(url: SplitResult, options: SinkOptions) -> Sink:
    """The ``kafka://`` opener (tidb-binlog protocol) for ``sinks.kafka.protocols``."""
    settings = parse_url(url, options.cluster_id)
    if settings.exactly_once:
        return await ExactlyOnceKafkaSink.open(settings, safe_mode=options.safe_mode)
    return await KafkaSink.open(settings, safe_mode=options.safe_mode)
