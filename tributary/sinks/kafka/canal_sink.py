"""The canal-json Kafka sink: TiCDC's ``kafka://...?protocol=canal-json`` for changefeeds.

URL ``kafka://HOST:PORT[,HOST:PORT]/TOPIC?protocol=canal-json&partition-num=3&
replication-factor=1&max-message-bytes=10MiB&kafka-version=2.4.0&enable-tidb-extension=true&
dispatcher=table&topic-rule={schema}_{table}&auto-create-topic=true&ack-timeout=30``:

* ``TOPIC`` (required) is the default topic: DDLs without a table (CREATE DATABASE) and every
  row when there is no ``topic-rule``. ``topic-rule`` (TiCDC's dispatcher topic expression)
  names a table's topic from ``{schema}`` and ``{table}``; a DDL goes to partition 0 of its
  table's topic (TiCDC's rule for canal-json).
* ``dispatcher``: which partition a row goes to: ``table`` (default; a hash of schema and
  table: a table's rows stay in order), ``index-value`` (a hash of the primary key, else the
  first unique key, else every column: a row's changes stay in order), ``ts`` (commit ts modulo
  the partition count).
* Topics missing are created (``auto-create-topic``) with ``partition-num`` (3) partitions and
  ``replication-factor`` (1); an existing topic with fewer than an explicit ``partition-num``
  is an error, as in TiCDC. ``kafka-version`` is accepted and ignored (the client negotiates).
* ``max-message-bytes`` (10 MiB, TiCDC's default): a message over it is refused with a
  non-retriable SinkError naming the table, the row's key and the transaction; the changefeed
  stops there instead of losing the row (raise the limit and the topic's ``max.message.bytes``).
* ``enable-tidb-extension``: ``_tidb.commitTs`` in every message, and after each batch a
  ``TIDB_WATERMARK`` at the batch's last commit ts on every partition of every topic written so
  far. A consumer that keeps events per partition and applies those at or below the smallest
  watermark of all partitions, in commit ts order, rebuilds the upstream (``canal.decode``).

Delivery is at-least-once, as TiCDC's: the sink's checkpoint is the last batch the brokers
acknowledged in this process (None after a start), so a restarted changefeed resends from its
own checkpoint. Messages go out from an idempotent producer with acks from all in-sync replicas.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, unquote

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, TopicAlreadyExistsError

from tributary.change import RowChange, TableInfo, Txn
from tributary.settings.parsers import parse_bool, parse_byte_size
from tributary.sinks.kafka.canal import (
    CanalJsonError,
    Columns,
    encode_ddl,
    encode_row,
    encode_watermark,
)
from tributary.sinks.port import SinkError, SinkOptions, pending

log = logging.getLogger(__name__)

DISPATCHERS = ("default", "table", "index-value", "ts")
DEFAULT_PARTITIONS = 3
DEFAULT_MAX_MESSAGE_BYTES = 10 << 20


@dataclass(frozen=True, slots=True)
class CanalSettings:
    brokers: tuple[str, ...]
    topic: str
    topic_rule: str = ""
    dispatcher: str = "table"
    partition_num: int = DEFAULT_PARTITIONS
    partition_num_given: bool = False
    replication_factor: int = 1
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    extension: bool = False
    auto_create: bool = True
    ack_timeout: float = 30.0

    def topic_of(self, schema: str, table: str) -> str:
        if not self.topic_rule or not table:
            return self.topic
        return self.topic_rule.replace("{schema}", schema).replace("{table}", table)


def _hash(*parts: object) -> int:
    return zlib.crc32("\x00".join(map(str, parts)).encode("utf-8", "surrogateescape"))


def partition_of(s: CanalSettings, change: RowChange, commit_ts: int, count: int) -> int:
    t = change.table
    if s.dispatcher == "ts":
        return commit_ts % count
    if s.dispatcher == "index-value":
        row = change.values
        cols = t.where_columns(row)
        return _hash(t.schema, t.table, *(row.get(c) for c in cols)) % count
    return _hash(t.schema, t.table) % count


class CanalJsonSink:
    """Sends row changes and DDLs as canal-json; ``safe_mode`` has no effect."""

    def __init__(self, settings: CanalSettings, producer: AIOKafkaProducer, safe_mode: bool):
        self.settings = settings
        self.safe_mode = safe_mode
        self._producer = producer
        self._partitions: dict[str, int] = {}
        self._columns: dict[TableInfo, Columns] = {}
        self._checkpoint: int | None = None
        self._lock = asyncio.Lock()

    async def checkpoint(self) -> int | None:
        return self._checkpoint

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
                    futures.append(await self._send(topic, 0, value, txn, None))
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
                        futures.append(await self._send(topic, p, mark, None, None))
                await self._settle(futures)
            self._checkpoint = last

    async def _send_row(self, change: RowChange, txn: Txn) -> asyncio.Future[object]:
        t = change.table
        cols = self._columns.get(t)
        if cols is None:
            cols = self._columns[t] = Columns.of(t)
        value = encode_row(change, txn.commit_ts, cols, extension=self.settings.extension)
        topic = self.settings.topic_of(t.schema, t.table)
        count = await self._partition_count(topic)
        partition = partition_of(self.settings, change, txn.commit_ts, count)
        return await self._send(topic, partition, value, txn, change)

    async def _send(
        self, topic: str, partition: int, value: bytes, txn: Txn | None, row: RowChange | None
    ) -> asyncio.Future[object]:
        if len(value) > self.settings.max_message_bytes:
            raise self._too_large(len(value), txn, row, None)
        try:
            future: asyncio.Future[object] = await self._producer.send(
                topic, value, partition=partition
            )
        except MessageSizeTooLargeError as e:
            raise self._too_large(len(value), txn, row, e) from e
        except KafkaError as e:
            raise SinkError(
                f"canal-json sink: cannot send to {topic}: {e!r}", retriable=True
            ) from e
        return future

    async def _settle(self, futures: list[asyncio.Future[object]]) -> None:
        if not futures:
            return
        done, waiting = await asyncio.wait(futures, timeout=self.settings.ack_timeout)
        futures.clear()
        if waiting:
            raise SinkError(
                f"canal-json sink: {len(waiting)} messages not acknowledged within "
                f"{self.settings.ack_timeout:g} s",
                retriable=True,
            )
        for f in done:
            error = f.exception()
            if isinstance(error, MessageSizeTooLargeError):
                raise SinkError(f"canal-json sink: a message over the broker's limit: {error!r}")
            if error is not None:
                raise SinkError(
                    f"canal-json sink: a message was not delivered: {error!r}", retriable=True
                ) from error

    def _too_large(
        self, size: int, txn: Txn | None, row: RowChange | None, e: BaseException | None
    ) -> CanalJsonError:
        what = "a message"
        if row is not None:
            key = {c: row.values.get(c) for c in row.table.where_columns(row.values)}
            what = f"the {row.kind.value} of {row.table.qualified} row {key}"
        if txn is not None:
            what += f" in txn {txn.commit_ts}"
        return CanalJsonError(
            f"canal-json sink: {what} is {size} bytes, over max-message-bytes "
            f"{self.settings.max_message_bytes} (raise max-message-bytes in the sink URI and the "
            f"topic's max.message.bytes){f': {e!r}' if e is not None else ''}"
        )

    async def _partition_count(self, topic: str) -> int:
        count = self._partitions.get(topic)
        if count is not None:
            return count
        s = self.settings
        try:
            found = (
                await self._producer.partitions_for(topic) if await self._exists(topic) else None
            )
            if not found:
                if not s.auto_create:
                    raise SinkError(f"canal-json sink: topic {topic} does not exist")
                await self._create(topic)
                found = await self._producer.partitions_for(topic)
        except KafkaError as e:
            raise SinkError(f"canal-json sink: topic {topic}: {e!r}", retriable=True) from e
        count = len(found)
        if s.partition_num_given and count < s.partition_num:
            raise SinkError(
                f"canal-json sink: topic {topic} has {count} partitions, fewer than "
                f"partition-num={s.partition_num}"
            )
        self._partitions[topic] = count
        return count

    async def _exists(self, topic: str) -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=list(self.settings.brokers))
        await admin.start()
        try:
            return topic in await admin.list_topics()
        finally:
            await admin.close()

    async def _create(self, topic: str) -> None:
        s = self.settings
        admin = AIOKafkaAdminClient(bootstrap_servers=list(s.brokers))
        await admin.start()
        try:
            new = NewTopic(topic, s.partition_num, s.replication_factor)
            await admin.create_topics([new])
            log.info("created topic %s with %d partitions", topic, s.partition_num)
        except TopicAlreadyExistsError:
            pass
        finally:
            await admin.close()

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self._producer.stop(), self.settings.ack_timeout)
        except TimeoutError:
            log.warning("canal-json sink: closed with messages in flight")


_OPTIONS = {
    "partition-num",
    "replication-factor",
    "max-message-bytes",
    "kafka-version",
    "enable-tidb-extension",
    "dispatcher",
    "topic-rule",
    "auto-create-topic",
    "ack-timeout",
}


def parse_url(url: SplitResult) -> CanalSettings:
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    unknown = sorted(set(query) - _OPTIONS)
    if unknown:
        raise SinkError(
            f"canal-json sink URL: unknown options {unknown}; known: {sorted(_OPTIONS)}"
        )
    brokers = tuple(b for b in url.netloc.split(",") if b)
    topic = unquote(url.path.strip("/"))
    if not brokers or not topic:
        raise SinkError(f"canal-json sink URL needs brokers and a topic: {url.geturl()!r}")
    dispatcher = query.get("dispatcher", "table")
    if dispatcher not in DISPATCHERS:
        raise SinkError(f"canal-json sink URL: dispatcher must be one of {DISPATCHERS}")
    try:
        s = CanalSettings(
            brokers,
            topic,
            topic_rule=query.get("topic-rule", ""),
            dispatcher="table" if dispatcher == "default" else dispatcher,
            partition_num=int(query.get("partition-num", DEFAULT_PARTITIONS)),
            partition_num_given="partition-num" in query,
            replication_factor=int(query.get("replication-factor", 1)),
            max_message_bytes=parse_byte_size(
                query.get("max-message-bytes", DEFAULT_MAX_MESSAGE_BYTES)
            ),
            extension=parse_bool(query.get("enable-tidb-extension", "false")),
            auto_create=parse_bool(query.get("auto-create-topic", "true")),
            ack_timeout=float(query.get("ack-timeout", 30)),
        )
    except ValueError as e:
        raise SinkError(f"canal-json sink URL {url.geturl()!r}: {e}") from e
    if min(s.partition_num, s.replication_factor, s.max_message_bytes) < 1 or s.ack_timeout <= 0:
        raise SinkError("canal-json sink URL: the numbers must be positive")
    return s


async def open_url(url: SplitResult, options: SinkOptions) -> CanalJsonSink:
    s = parse_url(url)
    producer = AIOKafkaProducer(
        bootstrap_servers=list(s.brokers),
        acks="all",
        enable_idempotence=True,
        max_request_size=s.max_message_bytes + 1024,
        request_timeout_ms=int(s.ack_timeout * 1000),
        linger_ms=5,
    )
    try:
        await producer.start()
    except KafkaError as e:
        await producer.stop()
        raise SinkError(
            f"canal-json sink: cannot reach the brokers {','.join(s.brokers)}: {e!r}",
            retriable=True,
        ) from e
    return CanalJsonSink(s, producer, options.safe_mode)
