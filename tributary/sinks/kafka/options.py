"""The ``kafka://`` URL: brokers, topic, tidb-binlog's producer keys and our opt-ins.

``kafka://[USER:PASSWORD@]HOST:PORT[,HOST:PORT]/[TOPIC]?OPTION=VALUE&...``; the topic defaults to
``<cluster-id>_obinlog`` as tidb-binlog's. A user in the URL turns SASL on (the password is masked
in every log line, as all sink URLs are). Options, tidb-binlog's first:

* ``kafka-version``, ``kafka-max-messages`` (1024), ``kafka-max-message-size`` (1GiB),
  ``kafka-client-id`` (tidb_binlog), ``ack-timeout`` (30 s);
* ``kafka-batch-size`` (512KiB, never above ``kafka-max-message-size``): the largest record batch
  the producer sends to one partition in one request (a message larger than it goes alone). The
  broker checks its ``message.max.bytes`` (1 MiB by default) against whole batches;
* ``kafka-exactly-once`` (false): each batch and its checkpoint commit in one Kafka transaction;
  the checkpoint lives in the compacted topic ``<topic>_checkpoint`` keyed by the cluster id, and
  ``kafka-transactional-id`` (default ``tributary-<topic>``) fences a previous incarnation;
* ``kafka-partition-by``: ``fixed`` (tidb-binlog's: everything on partition 0), ``table``
  (partition = murmur2 of ``schema.table``) or ``key`` (of ``schema.table`` and the row's primary
  or unique key values): order is kept per table or per key, DDL goes to every partition;
* ``kafka-message-per``: ``txn`` (tidb-binlog's: one message per transaction, or per transaction
  and partition) or ``row`` (one message per row change, still a secondary binlog);
* ``kafka-sasl-mechanism`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``; PLAIN when a user is
  given), ``kafka-tls`` (false; true when a CA is given), ``kafka-ssl-ca``, ``kafka-ssl-cert``,
  ``kafka-ssl-key`` (PEM files, read again before each new connection to a broker when they
  changed: ``telemetry.tlsreload``). tidb-binlog's Kafka output has neither TLS nor SASL.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote

from tributary.settings.parsers import parse_bool, parse_byte_size
from tributary.settings.security import SecuritySettings
from tributary.sinks.port import SinkError
from tributary.telemetry.tls import TlsError, client_context

DEFAULT_MAX_MESSAGE_SIZE = 1 << 30  # tidb-binlog's kafka-max-message-size
DEFAULT_MAX_MESSAGES = 1024
DEFAULT_BATCH_SIZE = 512 << 10  # under the broker's default message.max.bytes (1 MiB + 12)
DEFAULT_CLIENT_ID = "tidb_binlog"
DEFAULT_ACK_TIMEOUT = 30.0  # seconds; tidb-binlog fails when no ack came for 30 s
PARTITION_BY = ("fixed", "table", "key")
MESSAGE_PER = ("txn", "row")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def default_topic(cluster_id: int) -> str:
    return f"{cluster_id}_obinlog"


@dataclass(frozen=True, slots=True)
class Security:
    """How the client reaches the brokers: plain TCP, TLS, SASL or both."""

    tls: bool = False
    ssl_ca: str = ""
    ssl_cert: str = ""
    ssl_key: str = ""
    sasl_mechanism: str = ""
    sasl_user: str = ""
    sasl_password: str = field(default="", repr=False)

    @property
    def protocol(self) -> str:
        sasl = "SASL_" if self.sasl_mechanism else ""
        return f"{sasl}SSL" if self.tls else f"{sasl}PLAINTEXT"

    def ssl_context(self) -> ssl.SSLContext:
        """The client's TLS context. With files it follows them (``telemetry.tlsreload``): a
        rotated CA, certificate or key applies to the next connection to a broker, without a
        restart; with none it trusts the system's CAs."""
        files = SecuritySettings(ssl_ca=self.ssl_ca, ssl_cert=self.ssl_cert, ssl_key=self.ssl_key)
        try:
            return client_context(files, alpn=()) or ssl.create_default_context()
        except TlsError as e:
            raise SinkError(f"kafka TLS: {e}") from e

    def client_kwargs(self) -> dict[str, Any]:
        """aiokafka's keyword arguments for this security setup."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            kwargs["ssl_context"] = self.ssl_context()
        if self.sasl_mechanism:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_user
            kwargs["sasl_plain_password"] = self.sasl_password
        return kwargs


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    brokers: tuple[str, ...]
    topic: str
    max_messages: int = DEFAULT_MAX_MESSAGES
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    batch_size: int = DEFAULT_BATCH_SIZE
    client_id: str = DEFAULT_CLIENT_ID
    ack_timeout: float = DEFAULT_ACK_TIMEOUT
    kafka_version: str = ""
    cluster_id: int = 0
    exactly_once: bool = False
    transactional_id: str = ""
    partition_by: str = "fixed"
    message_per: str = "txn"
    security: Security = Security()

    @property
    def bootstrap(self) -> list[str]:
        return list(self.brokers)

    @property
    def record_batch_size(self) -> int:
        """Bytes per record batch: ``kafka-batch-size``, capped by ``kafka-max-message-size``
        (a topic limited to that must not see larger batches of small messages)."""
        return min(self.batch_size, self.max_message_size)

    @property
    def checkpoint_topic(self) -> str:
        return f"{self.topic}_checkpoint"

    @property
    def txn_id(self) -> str:
        return self.transactional_id or f"tributary-{self.topic}"

    @property
    def single_stream(self) -> bool:
        """Every message on partition 0, one per transaction: the topic's tail is the checkpoint."""
        return self.partition_by == "fixed" and self.message_per == "txn"

    def client_kwargs(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap,
            "client_id": self.client_id,
            "request_timeout_ms": int(self.ack_timeout * 1000),
            **self.security.client_kwargs(),
        }


_OPTIONS = frozenset(
    {
        "kafka-version",
        "kafka-max-messages",
        "kafka-max-message-size",
        "kafka-batch-size",
        "kafka-client-id",
        "ack-timeout",
        "kafka-exactly-once",
        "kafka-transactional-id",
        "kafka-partition-by",
        "kafka-message-per",
        "kafka-sasl-mechanism",
        "kafka-tls",
        "kafka-ssl-ca",
        "kafka-ssl-cert",
        "kafka-ssl-key",
    }
)


def _security(url: SplitResult, query: dict[str, str]) -> Security:
    user = unquote(url.username or "")
    mechanism = query.get("kafka-sasl-mechanism", "").upper() or ("PLAIN" if user else "")
    if mechanism and mechanism not in SASL_MECHANISMS:
        raise SinkError(f"kafka sink URL: kafka-sasl-mechanism must be one of {SASL_MECHANISMS}")
    if mechanism and not user:
        raise SinkError("kafka sink URL: SASL needs a user (kafka://USER:PASSWORD@HOST:PORT/)")
    ca = query.get("kafka-ssl-ca", "")
    tls = parse_bool(query.get("kafka-tls", "false")) or bool(ca)
    return Security(
        tls=tls,
        ssl_ca=ca,
        ssl_cert=query.get("kafka-ssl-cert", ""),
        ssl_key=query.get("kafka-ssl-key", ""),
        sasl_mechanism=mechanism,
        sasl_user=user,
        sasl_password=unquote(url.password or ""),
    )


def _choice(query: dict[str, str], key: str, choices: tuple[str, ...]) -> str:
    value = query.get(key, choices[0]).lower() or choices[0]
    if value not in choices:
        raise SinkError(f"kafka sink URL: {key} must be one of {', '.join(choices)}: {value!r}")
    return value


def parse_url(url: SplitResult, cluster_id: int) -> KafkaSettings:
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    unknown = sorted(set(query) - _OPTIONS)
    if unknown:
        raise SinkError(f"kafka sink URL: unknown options {unknown}; known: {sorted(_OPTIONS)}")
    hosts = url.netloc.rpartition("@")[2]
    brokers = tuple(b for b in hosts.split(",") if b)
    if not brokers:
        raise SinkError("kafka sink URL names no broker")
    topic = unquote(url.path.strip("/")) or default_topic(cluster_id)
    try:
        settings = KafkaSettings(
            brokers,
            topic,
            max_messages=int(query.get("kafka-max-messages", DEFAULT_MAX_MESSAGES)),
            max_message_size=parse_byte_size(
                query.get("kafka-max-message-size", DEFAULT_MAX_MESSAGE_SIZE)
            ),
            batch_size=parse_byte_size(query.get("kafka-batch-size", DEFAULT_BATCH_SIZE)),
            client_id=query.get("kafka-client-id", DEFAULT_CLIENT_ID) or DEFAULT_CLIENT_ID,
            ack_timeout=float(query.get("ack-timeout", DEFAULT_ACK_TIMEOUT)),
            kafka_version=query.get("kafka-version", ""),
            cluster_id=cluster_id,
            exactly_once=parse_bool(query.get("kafka-exactly-once", "false")),
            transactional_id=query.get("kafka-transactional-id", ""),
            partition_by=_choice(query, "kafka-partition-by", PARTITION_BY),
            message_per=_choice(query, "kafka-message-per", MESSAGE_PER),
            security=_security(url, query),
        )
    except ValueError as e:
        raise SinkError(f"kafka sink URL: {e}") from e
    sizes = (settings.max_messages, settings.max_message_size, settings.batch_size)
    if min(sizes) < 1 or settings.ack_timeout <= 0:
        raise SinkError(
            "kafka sink URL: kafka-max-messages, kafka-max-message-size, kafka-batch-size and "
            "ack-timeout must be positive"
        )
    return settings
