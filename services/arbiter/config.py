"""binlog-arbiter settings: arbiter.toml's keys, ``ARBITER_*`` environment variables and flags.

tidb-binlog's keys: ``addr`` (127.0.0.1:8251), ``log-level``, ``log-file``, ``[up]``
``kafka-addrs``, ``kafka-version``, ``topic``, ``initial-commit-ts`` (and ``message-buffer-size``,
``sarama-buffer-size``, ``open-sarama-log``, accepted and unused: aiokafka has no such buffers),
``[down]`` ``host``, ``port``, ``user``, ``password``, ``worker-count``, ``batch-size``,
``safe-mode``, ``[metrics]`` ``addr``, ``interval`` (a push gateway is not supported: the metrics
are served on ``addr``'s ``/metrics``). Ours: ``[down] db-type`` (mysql, tidb or sqlite),
``path`` (the SQLite file), ``consistent`` (each upstream transaction whole in one downstream
transaction with the checkpoint; false = tidb-binlog's parallel loader), ``url`` (any sink URL,
overriding the rest); ``[up] skip-malformed``, ``kafka-max-message-size``, ``log-format``.
Flags are ``--up-topic``, ``--down-host``, ... (the TOML path with dashes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

from tributary.settings import BYTE_SIZE, HOST_PORT, LogSettings, choice, group, setting
from tributary.sinks.schemes import OPENERS, BadSinkUrl, scheme_of

DEFAULT_ADDR = "127.0.0.1:8251"


@dataclass(frozen=True)
class UpConfig:
    """``[up]``: the Kafka topic holding the secondary binlog."""

    kafka_addrs: str = setting("127.0.0.1:9092", "Kafka brokers, comma separated")
    kafka_version: str = setting(
        "0.8.2.0", "accepted for tidb-binlog compatibility (the client negotiates the version)"
    )
    topic: str = setting("", "the topic to read (required; a drainer's is <cluster-id>_obinlog)")
    initial_commit_ts: int = setting(
        0, "with no checkpoint yet, apply the transactions committed after this ts (0 = all)"
    )
    kafka_max_message_size: int = setting(
        1 << 30, "the largest message to fetch (tidb-binlog's drainer default)", kind=BYTE_SIZE
    )
    skip_malformed: bool = setting(
        False, "log and skip a message that is not a secondary binlog instead of stopping"
    )
    message_buffer_size: int = setting(0, "accepted for tidb-binlog compatibility; unused")
    sarama_buffer_size: int = setting(0, "accepted for tidb-binlog compatibility; unused")

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.kafka_addrs.split(",") if a.strip())


@dataclass(frozen=True)
class DownConfig:
    """``[down]``: where the transactions are applied."""

    db_type: str = setting(
        "mysql", "downstream kind (url overrides it)", kind=choice("mysql", "tidb", "sqlite")
    )
    host: str = setting("localhost", "MySQL/TiDB host")
    port: int = setting(3306, "MySQL/TiDB port")
    user: str = setting("root", "MySQL/TiDB user")
    password: str = setting("", "MySQL/TiDB password", secret=True)
    path: str = setting("", "the SQLite file of db-type sqlite")
    url: str = setting("", "the downstream as a sink URL (mysql://..., sqlite:///...)", secret=True)
    worker_count: int = setting(16, "downstream connections when consistent = false")
    batch_size: int = setting(64, "row changes per downstream transaction when consistent = false")
    consistent: bool = setting(
        True, "each upstream transaction applied whole, with the checkpoint (MySQL/TiDB)"
    )
    safe_mode: bool = setting(False, "INSERT as REPLACE, UPDATE as DELETE + REPLACE, always")

    def sink_url(self) -> str:
        if self.url:
            return self.url
        if self.db_type == "sqlite":
            return "sqlite://" + os.path.abspath(self.path)
        auth = quote(self.user, safe="") + (
            ":" + quote(self.password, safe="") if self.password else ""
        )
        host = "127.0.0.1" if self.host == "localhost" else self.host
        consistent = "true" if self.consistent else "false"
        return f"mysql://{auth}@{host}:{self.port}/?consistent={consistent}"


@dataclass(frozen=True)
class MetricsConfig:
    """``[metrics]``: tidb-binlog's push-gateway settings (not supported: scrape ``/metrics``)."""

    addr: str = setting("", "Prometheus push gateway (unsupported: a warning is logged)")
    interval: int = setting(15, "push interval in seconds (unused)")


@dataclass(frozen=True)
class ArbiterConfig:
    """Everything ``binlog-arbiter`` can be told."""

    addr: str = setting(
        DEFAULT_ADDR, "HTTP address of /metrics, /status, /health (port 0 = any)", kind=HOST_PORT
    )
    log: LogSettings = group(LogSettings, "logging", inline=True)
    open_sarama_log: bool = setting(True, "accepted for tidb-binlog compatibility; unused")
    up: UpConfig = group(UpConfig, "the Kafka upstream")
    down: DownConfig = group(DownConfig, "the downstream database")
    metrics: MetricsConfig = group(MetricsConfig, "metrics push (tidb-binlog)")

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.up.topic:
            yield "up.topic", "required: the topic name of Kafka to consume"
        if not self.up.brokers:
            yield "up.kafka-addrs", "names no broker"
        if self.up.initial_commit_ts < 0:
            yield "up.initial-commit-ts", "must not be negative"
        if self.down.worker_count < 1 or self.down.batch_size < 1:
            yield "down.worker-count", "worker-count and batch-size must be at least 1"
        if not self.down.url and self.down.db_type == "sqlite" and not self.down.path:
            yield "down.path", "required with db-type = sqlite: the SQLite file"
        try:
            scheme = scheme_of(self.down.sink_url())
        except BadSinkUrl as e:
            yield "down.url" if self.down.url else "down.host", str(e)
        else:
            if scheme not in OPENERS:
                known = ", ".join(f"{s}://" for s in sorted(OPENERS))
                yield "down.url", f"unknown downstream scheme; known: {known}"
