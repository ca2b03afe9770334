"""A changefeed's Kafka block (``captures.changefeeds[].kafka``): parsing with every problem
listed, the TiCDC sink URL options it gives, and the claim-check volumes of the capture pods
(pure).

Invariant: the options come out in one fixed order and only when given (a boolean only when it
differs from the capture's default), so a spec that does not change never changes a changefeed's
sink URL, and the operator never updates a changefeed for nothing; the URL of a block using only
the fields of earlier versions is what those versions made.

Claim check (``large-message-handle-option=claim-check``; canal-json's needs
``enableTidbExtension``, where the location travels) writes each large
message to a file; on Kubernetes that file must outlive the pod and be readable by consumers, so
the block names an existing PersistentVolumeClaim (``claimCheckVolumeClaim``), mounted in every
capture pod at ``CLAIM_CHECK_DIR/<claim>``, and ``claimCheckStorageURI`` (TiCDC's
``claim-check-storage-uri``) must be a ``file://`` directory inside it. Worked example: ``{id:
orders, kafka: {protocol: open-protocol, largeMessageHandleOption: claim-check,
claimCheckVolumeClaim: big}}`` gives ``large-message-handle-option=claim-check`` and
``claim-check-storage-uri=file:///var/lib/binlog/claim-check/big/orders`` (the default directory:
the claim's, then the changefeed id), and the capture pods mount claim ``big`` at
``/var/lib/binlog/claim-check/big``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from binlog_operator.kafkasink import (
    KafkaSasl,
    KafkaTls,
    optional_positive,
    parse_brokers,
    parse_sasl,
    parse_tls,
    parse_topic,
)

PROTOCOLS = ("canal-json", "open-protocol", "debezium", "avro")
DISPATCHERS = ("table", "index-value", "ts")
LARGE_MESSAGE_OPTIONS = ("none", "claim-check")
CLAIM_CHECK_DIR = "/var/lib/binlog/claim-check"
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a PersistentVolumeClaim name
_KAFKA_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){1,3}$")
FIELDS = {  # the block's fields, as the CRD names them
    "brokers",
    "topic",
    "protocol",
    "partitionNum",
    "replicationFactor",
    "maxMessageBytes",
    "dispatcher",
    "topicRule",
    "enableTidbExtension",
    "contentCompatible",
    "onlyOutputUpdatedColumns",
    "maxBatchSize",
    "kafkaVersion",
    "autoCreateTopic",
    "ackTimeout",
    "largeMessageHandleOption",
    "claimCheckStorageURI",
    "claimCheckVolumeClaim",
    "sasl",
    "tls",
    "debeziumDisableSchema",
    "debeziumOutputOldValue",
    "debeziumTombstonesOnDelete",
    "debeziumPropagateSourceType",
    "debeziumDecimalHandlingMode",
    "debeziumBigintUnsignedHandlingMode",
    "debeziumBinaryHandlingMode",
    "debeziumSchemaChangeTopic",
    "timeZone",
    "schemaRegistry",
    "avroDecimalHandlingMode",
    "avroBigintUnsignedHandlingMode",
}
# TiCDC's URL keys for the numeric options
_NUMBERS = {
    "partitionNum": "partition-num",
    "replicationFactor": "replication-factor",
    "maxMessageBytes": "max-message-bytes",
}
# the protocols a switch is used with: {field: (protocols, URL key, the sink's default)}; only a
# value other than the default is sent
_PROTOCOL_FLAGS = {
    "enableTidbExtension": (("canal-json", "debezium", "avro"), "enable-tidb-extension", False),
    "contentCompatible": (("canal-json",), "content-compatible", False),
    "onlyOutputUpdatedColumns": (("canal-json",), "only-output-updated-columns", False),
    "debeziumDisableSchema": (("debezium",), "debezium-disable-schema", False),
    "debeziumOutputOldValue": (("debezium",), "debezium-output-old-value", True),
    "debeziumTombstonesOnDelete": (("debezium",), "debezium-tombstones-on-delete", False),
    "debeziumPropagateSourceType": (("debezium",), "debezium-propagate-source-type", False),
}
# debezium's words: {field: (URL key, the accepted values)}
DEBEZIUM_MODES = {
    "debeziumDecimalHandlingMode": (
        "debezium-decimal-handling-mode",
        ("precise", "string", "double"),
    ),
    "debeziumBigintUnsignedHandlingMode": (
        "debezium-bigint-unsigned-handling-mode",
        ("long", "precise", "string"),
    ),
    "debeziumBinaryHandlingMode": (
        "debezium-binary-handling-mode",
        ("bytes", "base64", "base64-url-safe", "hex"),
    ),
}
_DEBEZIUM_TEXT = {
    "debeziumSchemaChangeTopic": "debezium-schema-change-topic",
    "timeZone": "time-zone",
}
# avro's words: {field: (URL key, the accepted values)}
AVRO_MODES = {
    "avroDecimalHandlingMode": ("avro-decimal-handling-mode", ("precise", "string")),
    "avroBigintUnsignedHandlingMode": ("avro-bigint-unsigned-handling-mode", ("long", "string")),
}
_OPEN_ONLY = ("maxBatchSize",)


@dataclass(frozen=True)
class FeedKafka:
    brokers: tuple[str, ...]
    topic: str
    protocol: str = "canal-json"
    options: tuple[tuple[str, str], ...] = ()  # TiCDC URL keys, in a stable order
    sasl: KafkaSasl | None = None
    tls: KafkaTls | None = None
    claim_check_claim: str = ""  # the PersistentVolumeClaim of the claim-check files ("": none)


def claim_dir(claim: str) -> str:
    """Where the capture pods mount a claim-check PersistentVolumeClaim."""
    return f"{CLAIM_CHECK_DIR}/{claim}"


def parse_feed_kafka(
    raw: object, feed_id: str, where: str, problems: list[str]
) -> FeedKafka | None:
    """``changefeeds[].kafka`` of the changefeed ``feed_id``; every problem appended."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, not {type(raw).__name__}")
        return None
    k = dict(raw)
    problems += [f"{where}.{u}: unknown field" for u in sorted(set(k) - FIELDS)]
    brokers = parse_brokers(k.get("brokers"), f"{where}.brokers", problems)
    topic = parse_topic(k.get("topic"), f"{where}.topic", problems)
    if not topic:
        problems.append(f"{where}.topic: required (the changefeed's default topic)")
    protocol = str(k.get("protocol", "canal-json"))
    if protocol not in PROTOCOLS:
        problems.append(f"{where}.protocol: {protocol!r} must be one of {', '.join(PROTOCOLS)}")
    options = _common(k, where, problems)
    options += _flags(k, protocol, where, problems)
    options += _debezium(k, protocol, where, problems)
    options += _avro(k, protocol, where, problems)
    options += _open_protocol(k, protocol, feed_id, where, problems)
    options += _tuning(k, where, problems)
    claim_check = ("large-message-handle-option", "claim-check") in options
    return FeedKafka(
        brokers=brokers,
        topic=topic,
        protocol=protocol,
        options=tuple(options),
        sasl=parse_sasl(k.get("sasl"), f"{where}.sasl", problems),
        tls=parse_tls(k.get("tls"), f"{where}.tls", problems),
        claim_check_claim=str(k["claimCheckVolumeClaim"]) if claim_check else "",
    )


def _common(k: dict[str, object], where: str, problems: list[str]) -> list[tuple[str, str]]:
    """partition-num, replication-factor, max-message-bytes, dispatcher, topic-rule."""
    options: list[tuple[str, str]] = []
    for name, key in _NUMBERS.items():
        value = optional_positive(k.get(name), f"{where}.{name}", problems)
        if value is not None:
            options.append((key, str(value)))
    dispatcher = k.get("dispatcher")
    if dispatcher is not None:
        if dispatcher not in DISPATCHERS:
            problems.append(
                f"{where}.dispatcher: {dispatcher!r} must be one of {', '.join(DISPATCHERS)}"
            )
        else:
            options.append(("dispatcher", str(dispatcher)))
    rule = k.get("topicRule")
    if rule is not None:
        if not isinstance(rule, str) or not rule:
            problems.append(f"{where}.topicRule: must be a string such as {{schema}}_{{table}}")
        else:
            options.append(("topic-rule", rule))
    return options


def _flags(
    k: dict[str, object], protocol: str, where: str, problems: list[str]
) -> list[tuple[str, str]]:
    """The canal-json and debezium switches (enable-tidb-extension, content-compatible,
    only-output-updated-columns, debezium-*), each refused with another protocol."""
    options: list[tuple[str, str]] = []
    for name, (only, key, default) in _PROTOCOL_FLAGS.items():
        value = k.get(name)
        if value is None:
            continue
        if not isinstance(value, bool):
            problems.append(f"{where}.{name}: {value!r} must be true or false")
        elif protocol not in only:
            problems.append(f"{where}.{name}: only used with protocol {' or '.join(only)}")
        elif value != default:
            options.append((key, "true" if value else "false"))
    return options


def _debezium(
    k: dict[str, object], protocol: str, where: str, problems: list[str]
) -> list[tuple[str, str]]:
    """The debezium handling modes, schema change topic and time zone."""
    options: list[tuple[str, str]] = []
    given = [n for n in (*DEBEZIUM_MODES, *_DEBEZIUM_TEXT) if k.get(n) is not None]
    if protocol != "debezium":
        problems += [f"{where}.{name}: only used with protocol debezium" for name in given]
        return options
    for name, (key, allowed) in DEBEZIUM_MODES.items():
        value = k.get(name)
        if value is None:
            continue
        if value not in allowed:
            problems.append(f"{where}.{name}: {value!r} must be one of {', '.join(allowed)}")
        else:
            options.append((key, str(value)))
    for name, key in _DEBEZIUM_TEXT.items():
        value = k.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            problems.append(f"{where}.{name}: must be a non-empty string")
        else:
            options.append((key, value))
    return options


def _avro(
    k: dict[str, object], protocol: str, where: str, problems: list[str]
) -> list[tuple[str, str]]:
    """The avro schema registry (required) and handling modes; its topic rule must name a
    topic per table (subjects are named after topics)."""
    given = [n for n in ("schemaRegistry", *AVRO_MODES) if k.get(n) is not None]
    if protocol != "avro":
        problems += [f"{where}.{name}: only used with protocol avro" for name in given]
        return []
    rule = k.get("topicRule")
    if not isinstance(rule, str) or "{schema}" not in rule or "{table}" not in rule:
        problems.append(
            f"{where}.topicRule: protocol avro needs a topic per table: a rule holding "
            "{schema} and {table}"
        )
    registry = k.get("schemaRegistry")
    options: list[tuple[str, str]] = []
    if not isinstance(registry, str) or urlsplit(registry).scheme not in ("http", "https"):
        problems.append(
            f"{where}.schemaRegistry: protocol avro needs the schema registry's URL "
            "(http://HOST:PORT)"
        )
    else:
        options.append(("schema-registry", registry))
    for name, (key, allowed) in AVRO_MODES.items():
        value = k.get(name)
        if value is None:
            continue
        if value not in allowed:
            problems.append(f"{where}.{name}: {value!r} must be one of {', '.join(allowed)}")
        else:
            options.append((key, str(value)))
    return options


def _tuning(k: dict[str, object], where: str, problems: list[str]) -> list[tuple[str, str]]:
    """kafka-version, auto-create-topic, ack-timeout."""
    options: list[tuple[str, str]] = []
    version = k.get("kafkaVersion")
    if version is not None:
        if not isinstance(version, str) or not _KAFKA_VERSION.match(version):
            problems.append(f"{where}.kafkaVersion: {version!r} must be a version such as 2.4.0")
        else:
            options.append(("kafka-version", version))
    create = k.get("autoCreateTopic")
    if create is not None:
        if not isinstance(create, bool):
            problems.append(f"{where}.autoCreateTopic: {create!r} must be true or false")
        elif not create:
            options.append(("auto-create-topic", "false"))
    timeout = k.get("ackTimeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            problems.append(f"{where}.ackTimeout: {timeout!r} must be a number of seconds above 0")
        else:
            options.append(("ack-timeout", str(timeout)))
    return options


def _open_protocol(
    k: dict[str, object], protocol: str, feed_id: str, where: str, problems: list[str]
) -> list[tuple[str, str]]:
    """max-batch-size (refused with another protocol), then large-message-handle-option and
    claim-check-storage-uri (canal-json's claim check needs enableTidbExtension)."""
    if protocol != "open-protocol":
        given = [name for name in _OPEN_ONLY if k.get(name) is not None]
        problems += [f"{where}.{name}: only used with protocol open-protocol" for name in given]
        if protocol in ("debezium", "avro") and k.get("largeMessageHandleOption", "none") != "none":
            problems.append(
                f"{where}.largeMessageHandleOption: protocol {protocol} has no claim check here "
                "(a row over maxMessageBytes stops the changefeed naming it)"
            )
            return []
        if (
            k.get("largeMessageHandleOption") == "claim-check"
            and k.get("enableTidbExtension") is not True
        ):
            problems.append(
                f"{where}.largeMessageHandleOption: claim-check with protocol {protocol} needs "
                "enableTidbExtension: true (the claim's location travels in _tidb)"
            )
        return _large_messages(k, feed_id, where, problems)
    options: list[tuple[str, str]] = []
    batch = optional_positive(k.get("maxBatchSize"), f"{where}.maxBatchSize", problems)
    if batch is not None:
        options.append(("max-batch-size", str(batch)))
    return options + _large_messages(k, feed_id, where, problems)


def _large_messages(
    k: dict[str, object], feed_id: str, where: str, problems: list[str]
) -> list[tuple[str, str]]:
    """Claim check needs a claim to write to, and its URI must be a directory in it."""
    option = k.get("largeMessageHandleOption", "none")
    claim = k.get("claimCheckVolumeClaim")
    uri = k.get("claimCheckStorageURI")
    if option not in LARGE_MESSAGE_OPTIONS:
        problems.append(
            f"{where}.largeMessageHandleOption: {option!r} must be one of "
            f"{', '.join(LARGE_MESSAGE_OPTIONS)}"
        )
        return []
    if option != "claim-check":
        given = [
            n for n, v in (("claimCheckStorageURI", uri), ("claimCheckVolumeClaim", claim)) if v
        ]
        problems += [
            f"{where}.{name}: only used with largeMessageHandleOption: claim-check"
            for name in given
        ]
        return []
    if not claim:
        problems.append(
            f"{where}.claimCheckVolumeClaim: required with claim-check (an existing "
            "PersistentVolumeClaim the capture pods write the large messages to and consumers "
            "read them from; ReadWriteMany with more than one capture)"
        )
        return []
    if not isinstance(claim, str) or not _CLAIM.match(claim):
        problems.append(
            f"{where}.claimCheckVolumeClaim: {claim!r} is not a PersistentVolumeClaim name"
        )
        return []
    directory = claim_dir(claim)
    if uri is None:
        uri = f"file://{directory}/{feed_id}"
    elif not isinstance(uri, str) or not _inside(uri, directory):
        problems.append(
            f"{where}.claimCheckStorageURI: {uri!r} must be file://{directory} or a directory "
            "under it (where the capture pods mount claimCheckVolumeClaim)"
        )
        return []
    return [("large-message-handle-option", "claim-check"), ("claim-check-storage-uri", uri)]


def _inside(uri: str, directory: str) -> bool:
    """Whether ``uri`` is ``file://`` naming ``directory`` or a directory under it (no ``.``,
    ``..`` or empty segment)."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query:
        return False
    path = unquote(parts.path)
    norm = posixpath.normpath(path)
    return norm == path.rstrip("/") and (norm == directory or norm.startswith(directory + "/"))
