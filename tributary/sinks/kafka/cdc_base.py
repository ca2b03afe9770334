"""What TiCDC's Kafka protocols share: the sink URL, topics and partitions, sending, large messages.

URL ``kafka://HOST:PORT[,HOST:PORT]/TOPIC?protocol=P&partition-num=3&replication-factor=1&
max-message-bytes=10MiB&kafka-version=2.4.0&dispatcher=table&topic-rule={schema}_{table}&
auto-create-topic=true&ack-timeout=30`` plus, per protocol, ``enable-tidb-extension``,
``content-compatible`` and ``only-output-updated-columns`` (canal-json), ``max-batch-size``
(open-protocol), the ``debezium-*`` options and ``time-zone`` (debezium, see
``debezium_sink``), ``schema-registry`` and the ``avro-*`` options (avro, see ``avro_sink``)
and the large-message keys
``large-message-handle-option`` (``none``, ``claim-check``) and ``claim-check-storage-uri``
(``file:///DIR``), which TiCDC reads from ``[sink.kafka-config.large-message-handle]`` of the
changefeed's config and this sink from its URL.

Security, TiCDC's keys: ``enable-tls`` (false; true when ``ca`` is given), ``ca``, ``cert``, ``key``
(PEM files on the capture's host), ``sasl-mechanism`` (``PLAIN``, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``; PLAIN when a user is given). The SASL user and password go in the URL's user
part (``kafka://USER:PASSWORD@HOST:PORT/TOPIC``), where every place that shows a sink URL masks
the password; TiCDC's ``sasl-user``/``sasl-password`` query keys are refused for that reason.

* ``TOPIC`` (required) is the default topic: DDLs without a table (CREATE DATABASE) and every
  row when there is no ``topic-rule``; ``topic-rule`` names a table's topic from ``{schema}``
  and ``{table}``.
* ``dispatcher``: which partition a row goes to: ``table`` (default; a hash of schema and table:
  a table's rows stay in order), ``index-value`` (a hash of the primary key, else the first
  unique key, else every column: a row's changes stay in order), ``ts`` (commit ts modulo the
  partition count).
* Topics missing are created (``auto-create-topic``) with ``partition-num`` partitions and
  ``replication-factor``; an existing topic with fewer than an explicit ``partition-num`` is an
  error, as in TiCDC.
* A message over ``max-message-bytes`` is refused with a non-retriable error naming the table,
  the row's key and the transaction (the changefeed stops there; nothing after it is written),
  unless ``large-message-handle-option=claim-check``: then the whole message goes to a file of
  the claim-check storage and the Kafka message carries its location and the row's handle key
  columns (canal-json: in ``_tidb``, so it needs ``enable-tidb-extension=true``, as TiCDC does).

Delivery is at-least-once, as TiCDC's: the checkpoint is the last batch the brokers acknowledged
in this process (None after a start). Messages go out from an idempotent producer with acks from
all in-sync replicas.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, TopicAlreadyExistsError

from tributary.change import RowChange, TableInfo, Txn
from tributary.settings.parsers import parse_bool, parse_byte_size
from tributary.sinks.kafka.claimcheck import ClaimCheck
from tributary.sinks.kafka.options import SASL_MECHANISMS, Security
from tributary.sinks.port import SinkError

log = logging.getLogger(__name__)

DISPATCHERS = ("default", "table", "index-value", "ts")
LARGE_MESSAGE_OPTIONS = ("none", "claim-check")
DEFAULT_PARTITIONS = 3
DEFAULT_MAX_MESSAGE_BYTES = 10 << 20
DEFAULT_MAX_BATCH_SIZE = 16  # TiCDC's max-batch-size: events per open-protocol message


class MessageTooLarge(SinkError):
    """A row whose message exceeds max-message-bytes (not retriable: the row would not fit)."""


@dataclass(frozen=True, slots=True)
class CdcSettings:
    protocol: str
    brokers: tuple[str, ...]
    topic: str
    topic_rule: str = ""
    dispatcher: str = "table"
    partition_num: int = DEFAULT_PARTITIONS
    partition_num_given: bool = False
    replication_factor: int = 1
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    extension: bool = False
    content_compatible: bool = False  # canal-json: Canal's full mysqlType and partial old
    only_updated: bool = False  # canal-json: an UPDATE's old holds the changed columns only
    auto_create: bool = True
    ack_timeout: float = 30.0
    large_message: str = "none"
    claim_check_uri: str = ""
    security: Security = field(default_factory=Security)

    def topic_of(self, schema: str, table: str) -> str:
        if not self.topic_rule or not table:
            return self.topic
        return self.topic_rule.replace("{schema}", schema).replace("{table}", table)


def _hash(*parts: object) -> int:
    return zlib.crc32("\x00".join(map(str, parts)).encode("utf-8", "surrogateescape"))


def partition_of(s: CdcSettings, change: RowChange, commit_ts: int, count: int) -> int:
    t = change.table
    if s.dispatcher == "ts":
        return commit_ts % count
    if s.dispatcher == "index-value":
        row = change.values
        cols = t.where_columns(row)
        return _hash(t.schema, t.table, *(row.get(c) for c in cols)) % count
    return _hash(t.schema, t.table) % count


async def open_claim_check(s: CdcSettings) -> ClaimCheck | None:
    """The claim-check storage of ``large-message-handle-option=claim-check``, ready to write."""
    if s.large_message != "claim-check":
        return None
    claim_check = ClaimCheck(s.claim_check_uri)
    await claim_check.start()
    return claim_check


def row_named(row: RowChange | None, txn: Txn | None) -> str:
    """``the insert of db.t row {'id': 2} in txn 6``: how errors name a row."""
    what = "a message"
    if row is not None:
        key = {c: row.values.get(c) for c in row.table.where_columns(row.values)}
        what = f"the {row.kind.value} of {row.table.qualified} row {key}"
    if txn is not None:
        what += f" in txn {txn.commit_ts}"
    return what


class TopicSink:
    """Topics, partitions and sending for the TiCDC protocol sinks (subclasses encode), and the
    claim-check storage of large messages (None: a large message is refused)."""

    large_hint = ", or set large-message-handle-option=claim-check"  # how else to send one

    def __init__(
        self,
        settings: CdcSettings,
        producer: AIOKafkaProducer,
        safe_mode: bool,
        claim_check: ClaimCheck | None = None,
    ):
        self.settings = settings
        self.safe_mode = safe_mode
        self._claim_check = claim_check
        self._columns: dict[TableInfo, Any] = {}  # a table's encoding plan, the protocol's
        self._producer = producer
        self._partitions: dict[str, int] = {}
        self._checkpoint: int | None = None
        self._lock = asyncio.Lock()

    @property
    def _name(self) -> str:
        return f"{self.settings.protocol} sink"

    async def checkpoint(self) -> int | None:
        return self._checkpoint

    async def _send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        txn: Txn | None,
        row: RowChange | None,
    ) -> asyncio.Future[object]:
        size = len(value or b"") + len(key or b"")  # a null value: a tombstone
        if size > self.settings.max_message_bytes:
            raise self.too_large(size, txn, row, None)
        try:
            future: asyncio.Future[object] = await self._producer.send(
                topic, value, key=key, partition=partition
            )
        except MessageSizeTooLargeError as e:
            raise self.too_large(size, txn, row, e) from e
        except KafkaError as e:
            raise SinkError(f"{self._name}: cannot send to {topic}: {e!r}", retriable=True) from e
        return future

    async def _settle(self, futures: list[asyncio.Future[object]]) -> None:
        if not futures:
            return
        done, waiting = await asyncio.wait(futures, timeout=self.settings.ack_timeout)
        futures.clear()
        if waiting:
            raise SinkError(
                f"{self._name}: {len(waiting)} messages not acknowledged within "
                f"{self.settings.ack_timeout:g} s",
                retriable=True,
            )
        for f in done:
            error = f.exception()
            if isinstance(error, MessageSizeTooLargeError):
                raise MessageTooLarge(f"{self._name}: a message over the broker's limit: {error!r}")
            if error is not None:
                raise SinkError(
                    f"{self._name}: a message was not delivered: {error!r}", retriable=True
                ) from error

    def too_large(
        self, size: int, txn: Txn | None, row: RowChange | None, e: BaseException | None
    ) -> MessageTooLarge:
        return MessageTooLarge(
            f"{self._name}: {row_named(row, txn)} is {size} bytes, over max-message-bytes "
            f"{self.settings.max_message_bytes} (raise max-message-bytes in the sink URI and the "
            f"topic's max.message.bytes{self.large_hint})"
            f"{f': {e!r}' if e is not None else ''}"
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
                    raise SinkError(f"{self._name}: topic {topic} does not exist")
                await self._create(topic)
                found = await self._producer.partitions_for(topic)
        except KafkaError as e:
            raise SinkError(f"{self._name}: topic {topic}: {e!r}", retriable=True) from e
        count = len(found)
        if s.partition_num_given and count < s.partition_num:
            raise SinkError(
                f"{self._name}: topic {topic} has {count} partitions, fewer than "
                f"partition-num={s.partition_num}"
            )
        self._partitions[topic] = count
        return count

    async def _exists(self, topic: str) -> bool:
        s = self.settings
        admin = AIOKafkaAdminClient(bootstrap_servers=list(s.brokers), **s.security.client_kwargs())
        await admin.start()
        try:
            return topic in await admin.list_topics()
        finally:
            await admin.close()

    async def _create(self, topic: str) -> None:
        s = self.settings
        admin = AIOKafkaAdminClient(bootstrap_servers=list(s.brokers), **s.security.client_kwargs())
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
            log.warning("%s: closed with messages in flight", self._name)


_OPTIONS = {
    "partition-num",
    "replication-factor",
    "max-message-bytes",
    "kafka-version",
    "dispatcher",
    "topic-rule",
    "auto-create-topic",
    "ack-timeout",
    "enable-tls",
    "ca",
    "cert",
    "key",
    "sasl-mechanism",
}
_PROTOCOL_OPTIONS = {
    "canal-json": {
        "enable-tidb-extension",
        "content-compatible",
        "only-output-updated-columns",
        "large-message-handle-option",
        "claim-check-storage-uri",
    },
    "open-protocol": {"max-batch-size", "large-message-handle-option", "claim-check-storage-uri"},
    "debezium": {
        "enable-tidb-extension",
        "debezium-disable-schema",
        "debezium-output-old-value",
        "debezium-decimal-handling-mode",
        "debezium-bigint-unsigned-handling-mode",
        "debezium-binary-handling-mode",
        "debezium-tombstones-on-delete",
        "debezium-schema-change-topic",
        "debezium-propagate-source-type",
        "time-zone",
    },
    "avro": {
        "schema-registry",
        "avro-decimal-handling-mode",
        "avro-bigint-unsigned-handling-mode",
        "enable-tidb-extension",
    },
}


def parse_url(url: SplitResult, protocol: str) -> CdcSettings:
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    known = _OPTIONS | _PROTOCOL_OPTIONS.get(protocol, set())
    unknown = sorted(set(query) - known)
    if unknown:
        raise SinkError(f"{protocol} sink URL: unknown options {unknown}; known: {sorted(known)}")
    brokers = tuple(b for b in url.netloc.rpartition("@")[2].split(",") if b)
    topic = unquote(url.path.strip("/"))
    if not brokers or not topic:
        raise SinkError(f"{protocol} sink URL needs brokers and a topic: {url.geturl()!r}")
    dispatcher = query.get("dispatcher", "table")
    if dispatcher not in DISPATCHERS:
        raise SinkError(f"{protocol} sink URL: dispatcher must be one of {DISPATCHERS}")
    large = query.get("large-message-handle-option", "none") or "none"
    if large not in LARGE_MESSAGE_OPTIONS:
        raise SinkError(
            f"{protocol} sink URL: large-message-handle-option must be one of "
            f"{LARGE_MESSAGE_OPTIONS}: {large!r}"
        )
    claim_uri = query.get("claim-check-storage-uri", "")
    if large == "claim-check" and not claim_uri.startswith("file://"):
        raise SinkError(
            f"{protocol} sink URL: large-message-handle-option=claim-check needs "
            "claim-check-storage-uri=file:///DIR"
        )
    try:
        s = CdcSettings(
            protocol,
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
            max_batch_size=int(query.get("max-batch-size", DEFAULT_MAX_BATCH_SIZE)),
            extension=_flag(query, "enable-tidb-extension", protocol),
            content_compatible=_flag(query, "content-compatible", protocol),
            only_updated=_flag(query, "only-output-updated-columns", protocol),
            auto_create=parse_bool(query.get("auto-create-topic", "true")),
            ack_timeout=float(query.get("ack-timeout", 30)),
            large_message=large,
            claim_check_uri=claim_uri,
            security=_security(url, query, protocol),
        )
    except ValueError as e:
        raise SinkError(f"{protocol} sink URL {url.geturl()!r}: {e}") from e
    if protocol == "canal-json" and large == "claim-check" and not s.extension:
        raise SinkError(
            "canal-json sink URL: large-message-handle-option=claim-check needs "
            "enable-tidb-extension=true (the claim's location travels in _tidb)"
        )
    numbers = (s.partition_num, s.replication_factor, s.max_message_bytes, s.max_batch_size)
    if min(numbers) < 1 or s.ack_timeout <= 0:
        raise SinkError(f"{protocol} sink URL: the numbers must be positive")
    return s


def _flag(query: dict[str, str], key: str, protocol: str) -> bool:
    try:
        return parse_bool(query.get(key, "false") or "false")
    except ValueError:
        raise SinkError(
            f"{protocol} sink URL: {key} must be true or false, not {query[key]!r}"
        ) from None


def _security(url: SplitResult, query: dict[str, str], protocol: str) -> Security:
    """TLS and SASL from TiCDC's keys and the URL's user part."""
    user = unquote(url.username or "")
    mechanism = query.get("sasl-mechanism", "").upper() or ("PLAIN" if user else "")
    if mechanism and mechanism not in SASL_MECHANISMS:
        raise SinkError(f"{protocol} sink URL: sasl-mechanism must be one of {SASL_MECHANISMS}")
    if mechanism and not user:
        raise SinkError(
            f"{protocol} sink URL: sasl-mechanism needs a user: kafka://USER:PASSWORD@HOST:PORT/"
        )
    ca = query.get("ca", "")
    cert, key = query.get("cert", ""), query.get("key", "")
    if bool(cert) != bool(key):
        raise SinkError(f"{protocol} sink URL: cert and key go together")
    return Security(
        tls=parse_bool(query.get("enable-tls", "false")) or bool(ca),
        ssl_ca=ca,
        ssl_cert=cert,
        ssl_key=key,
        sasl_mechanism=mechanism,
        sasl_user=user,
        sasl_password=unquote(url.password or ""),
    )


async def open_producer(s: CdcSettings) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(
        bootstrap_servers=list(s.brokers),
        acks="all",
        enable_idempotence=True,
        max_request_size=s.max_message_bytes + 1024,
        request_timeout_ms=int(s.ack_timeout * 1000),
        linger_ms=5,
        **s.security.client_kwargs(),
    )
    try:
        await producer.start()
    except KafkaError as e:
        await producer.stop()
        raise SinkError(
            f"{s.protocol} sink: cannot reach the brokers {','.join(s.brokers)}: {e!r}",
            retriable=True,
        ) from e
    return producer
