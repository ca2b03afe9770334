"""A drainer's Kafka sink as the BinlogCluster spec declares it (``drainers[].kafka``): parsing,
the ``[syncer.to]`` keys it renders, and what it adds to the drainer's pod (pure).

Invariant: credentials never reach the ConfigMap. The SASL user and password are passed as
environment variables from a Secret (``DRAINER_SYNCER_TO_KAFKA_SASL_USER``/``_PASSWORD``, which
the drainer's settings loader reads over the TOML), and the TLS files are a Secret mounted at
``KAFKA_TLS_DIR``; the ConfigMap holds only their paths and the non-secret options.

Worked example: ``{brokers: [k-0:9092, k-1:9092], topic: binlog, partitionBy: key, sasl:
{secretName: kafka-user}}`` renders ``[syncer] db-type = "kafka"`` and ``[syncer.to] kafka-addrs
= "k-0:9092,k-1:9092"``, ``topic-name = "binlog"``, ``kafka-partition-by = "key"``,
``kafka-sasl-mechanism = "PLAIN"``, and gives the pod the two env entries with ``secretKeyRef``
``{name: kafka-user, key: username}`` and ``{..., key: password}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KAFKA_TLS_DIR = "/etc/binlog/kafka-tls"
SASL_USER_ENV = "DRAINER_SYNCER_TO_KAFKA_SASL_USER"
SASL_PASSWORD_ENV = "DRAINER_SYNCER_TO_KAFKA_SASL_PASSWORD"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PARTITION_BY = ("fixed", "table", "key")
MESSAGE_PER = ("txn", "row")
# the [syncer.to] keys (and [syncer] keys) a ``kafka`` block owns: setting one in config is refused
MANAGED_TO = (
    "kafka-addrs",
    "topic-name",
    "kafka-exactly-once",
    "kafka-transactional-id",
    "kafka-partition-by",
    "kafka-message-per",
    "kafka-max-messages",
    "kafka-max-message-size",
    "kafka-client-id",
    "kafka-sasl-mechanism",
    "kafka-sasl-user",
    "kafka-sasl-password",
    "kafka-tls",
    "kafka-ssl-ca",
    "kafka-ssl-cert",
    "kafka-ssl-key",
)
MANAGED_SYNCER = ("db-type", "sink-uri")
_BROKER = re.compile(
    r"^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$|^\[[0-9a-fA-F:.]+\]:[0-9]{1,5}$"
)
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._-]{1,255}$")


@dataclass(frozen=True)
class KafkaSasl:
    """SASL credentials: the Secret ``secret`` holds the user at ``user_key`` and the password
    at ``password_key``."""

    secret: str
    mechanism: str = "PLAIN"
    user_key: str = "username"
    password_key: str = "password"


@dataclass(frozen=True)
class KafkaTls:
    """TLS to the brokers: the Secret ``secret`` holds the CA at ``ca_key`` and, for a client
    certificate, the certificate at ``cert_key`` and its key at ``key_key`` ("" = none)."""

    secret: str
    ca_key: str = "ca.crt"
    cert_key: str = ""
    key_key: str = ""


@dataclass(frozen=True)
class KafkaSpec:
    brokers: tuple[str, ...]
    topic: str = ""  # "" = the drainer's default, <cluster-id>_obinlog
    exactly_once: bool = False
    transactional_id: str = ""
    partition_by: str = "fixed"
    message_per: str = "txn"
    max_messages: int | None = None
    max_message_size: int | None = None
    client_id: str = ""
    sasl: KafkaSasl | None = None
    tls: KafkaTls | None = None


def parse_kafka(raw: object, where: str, problems: list[str]) -> KafkaSpec | None:
    """``drainers[].kafka``; every problem appended to ``problems``."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, not {type(raw).__name__}")
        return None
    k = dict(raw)
    unknown = sorted(set(k) - _FIELDS)
    problems += [f"{where}.{u}: unknown field" for u in unknown]
    brokers = parse_brokers(k.get("brokers"), f"{where}.brokers", problems)
    topic = parse_topic(k.get("topic"), f"{where}.topic", problems)
    once = _bool(k.get("exactlyOnce", False), f"{where}.exactlyOnce", problems)
    txn_id = str(k.get("transactionalId") or "")
    if txn_id and not once:
        problems.append(f"{where}.transactionalId: only used with exactlyOnce: true")
    client_id = str(k.get("clientId") or "")
    if client_id and not _CLIENT_ID.match(client_id):
        problems.append(f"{where}.clientId: {client_id!r} must be letters, digits, '.', '_', '-'")
    return KafkaSpec(
        brokers=brokers,
        topic=topic,
        exactly_once=once,
        transactional_id=txn_id,
        partition_by=_choice(
            k.get("partitionBy", "fixed"), PARTITION_BY, f"{where}.partitionBy", problems
        ),
        message_per=_choice(
            k.get("messagePer", "txn"), MESSAGE_PER, f"{where}.messagePer", problems
        ),
        max_messages=optional_positive(k.get("maxMessages"), f"{where}.maxMessages", problems),
        max_message_size=optional_positive(
            k.get("maxMessageSize"), f"{where}.maxMessageSize", problems
        ),
        client_id=client_id,
        sasl=parse_sasl(k.get("sasl"), f"{where}.sasl", problems),
        tls=parse_tls(k.get("tls"), f"{where}.tls", problems),
    )


def parse_brokers(raw: object, where: str, problems: list[str]) -> tuple[str, ...]:
    """A list (or a comma-separated string) of ``host:port``, at least one."""
    brokers = raw
    if isinstance(brokers, str):
        brokers = [b for b in brokers.split(",") if b]
    if not isinstance(brokers, list) or not brokers:
        problems.append(f"{where}: at least one broker host:port is required")
        brokers = []
    found = tuple(str(b).strip() for b in brokers)
    problems += [f"{where}: {b!r} is not a host:port" for b in found if not _BROKER.match(b)]
    return found


def parse_topic(raw: object, where: str, problems: list[str]) -> str:
    """A Kafka topic name, or "" when not given."""
    topic = str(raw or "")
    if topic and (not _TOPIC.match(topic) or topic in (".", "..")):
        problems.append(
            f"{where}: {topic!r} is not a Kafka topic name (letters, digits, '.', '_', "
            "'-'; at most 249)"
        )
    return topic


_FIELDS = {
    "brokers",
    "topic",
    "exactlyOnce",
    "transactionalId",
    "partitionBy",
    "messagePer",
    "maxMessages",
    "maxMessageSize",
    "clientId",
    "sasl",
    "tls",
}


def parse_sasl(raw: object, where: str, problems: list[str]) -> KafkaSasl | None:
    """``sasl``: the Secret and the keys of the user and password in it."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, not {type(raw).__name__}")
        return None
    secret = _secret_name(raw.get("secretName"), f"{where}.secretName", problems)
    mechanism = _choice(raw.get("mechanism", "PLAIN"), MECHANISMS, f"{where}.mechanism", problems)
    user = _key(raw.get("userKey", "username"), f"{where}.userKey", problems)
    password = _key(raw.get("passwordKey", "password"), f"{where}.passwordKey", problems)
    return KafkaSasl(secret, mechanism, user, password)


def parse_tls(raw: object, where: str, problems: list[str]) -> KafkaTls | None:
    """``tls``: the Secret and the keys of the CA (and a client certificate) in it."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, not {type(raw).__name__}")
        return None
    secret = _secret_name(raw.get("secretName"), f"{where}.secretName", problems)
    ca = _key(raw.get("caKey", "ca.crt"), f"{where}.caKey", problems)
    cert = _key(raw.get("certKey") or "", f"{where}.certKey", problems, optional=True)
    key = _key(raw.get("keyKey") or "", f"{where}.keyKey", problems, optional=True)
    if bool(cert) != bool(key):
        problems.append(
            f"{where}: certKey and keyKey go together (a client certificate and its key)"
        )
    return KafkaTls(secret, ca, cert, key)


def syncer_to(k: KafkaSpec, tls_dir: str = KAFKA_TLS_DIR) -> dict[str, Any]:
    """The ``[syncer.to]`` keys of ``k`` (non-secret: the credentials come from the pod)."""
    to: dict[str, Any] = {"kafka-addrs": ",".join(k.brokers)}
    if k.topic:
        to["topic-name"] = k.topic
    if k.exactly_once:
        to["kafka-exactly-once"] = True
    if k.transactional_id:
        to["kafka-transactional-id"] = k.transactional_id
    to["kafka-partition-by"] = k.partition_by
    to["kafka-message-per"] = k.message_per
    if k.max_messages is not None:
        to["kafka-max-messages"] = k.max_messages
    if k.max_message_size is not None:
        to["kafka-max-message-size"] = k.max_message_size
    if k.client_id:
        to["kafka-client-id"] = k.client_id
    if k.sasl is not None:
        to["kafka-sasl-mechanism"] = k.sasl.mechanism
    if k.tls is not None:
        to["kafka-tls"] = True
        to["kafka-ssl-ca"] = f"{tls_dir}/{k.tls.ca_key}"
        if k.tls.cert_key:
            to["kafka-ssl-cert"] = f"{tls_dir}/{k.tls.cert_key}"
            to["kafka-ssl-key"] = f"{tls_dir}/{k.tls.key_key}"
    return to


def pod_env(k: KafkaSpec | None) -> tuple[dict[str, Any], ...]:
    """The drainer container's env entries: the SASL user and password from their Secret."""
    if k is None or k.sasl is None:
        return ()
    s = k.sasl
    return tuple(
        {"name": env, "valueFrom": {"secretKeyRef": {"name": s.secret, "key": key}}}
        for env, key in ((SASL_USER_ENV, s.user_key), (SASL_PASSWORD_ENV, s.password_key))
    )


def stand_in_env(k: KafkaSpec | None) -> dict[str, str]:
    """Values for the names ``pod_env`` sets, for checking a config the way the pod loads it."""
    return {e["name"]: "stand-in" for e in pod_env(k)}


def pod_volumes(
    k: KafkaSpec | None,
) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    """(volumes, mounts): the TLS Secret's keys as files under ``KAFKA_TLS_DIR``, read-only."""
    if k is None or k.tls is None:
        return (), ()
    t = k.tls
    keys = [t.ca_key] + ([t.cert_key, t.key_key] if t.cert_key else [])
    items = [{"key": key, "path": key} for key in keys]  # a Secret key is a valid file name
    secret = {"secretName": t.secret, "items": items, "defaultMode": 0o440}
    volume = {"name": "kafka-tls", "secret": secret}
    mount = {"name": "kafka-tls", "mountPath": KAFKA_TLS_DIR, "readOnly": True}
    return (volume,), (mount,)


def tls_files(k: KafkaSpec | None) -> tuple[str, ...]:
    """The file names ``syncer_to`` points at under the TLS directory."""
    if k is None or k.tls is None:
        return ()
    t = k.tls
    return tuple(key for key in (t.ca_key, t.cert_key, t.key_key) if key)


def _secret_name(raw: object, where: str, problems: list[str]) -> str:
    name = str(raw or "")
    if not name:
        problems.append(f"{where}: required (a Secret in the cluster's namespace)")
    elif not _DNS_NAME.match(name):
        problems.append(f"{where}: {name!r} is not a Secret name")
    return name


def _key(raw: object, where: str, problems: list[str], optional: bool = False) -> str:
    key = str(raw)
    if optional and not key:
        return ""
    if not _SECRET_KEY.match(key) or key in (".", ".."):
        problems.append(f"{where}: {key!r} is not a Secret key")
    return key


def _choice(raw: object, allowed: tuple[str, ...], where: str, problems: list[str]) -> str:
    if raw not in allowed:
        problems.append(f"{where}: {raw!r} must be one of {', '.join(allowed)}")
        return allowed[0]
    return str(raw)


def _bool(raw: object, where: str, problems: list[str]) -> bool:
    if not isinstance(raw, bool):
        problems.append(f"{where}: {raw!r} must be true or false")
        return False
    return raw


def optional_positive(raw: object, where: str, problems: list[str]) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        problems.append(f"{where}: {raw!r} must be an integer of at least 1")
        return None
    return raw
