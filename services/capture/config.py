"""``binlog-cdc server`` settings: TOML keys after TiCDC's server config, ``CDC_*`` environment
variables and flags (precedence defaults < ``--config`` file < environment < flags).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tributary.cdc.keys import valid_id
from tributary.settings import (
    DURATION,
    URL_LIST,
    ListenSettings,
    LogSettings,
    SecuritySettings,
    group,
    setting,
)


@dataclass(frozen=True)
class CaptureConfig:
    """Everything ``binlog-cdc server`` can be told."""

    listen: ListenSettings = group(
        ListenSettings,
        "the HTTP API listen address",
        inline=True,
        default=ListenSettings("127.0.0.1:8300"),
    )
    etcd: tuple[str, ...] = setting(
        ("http://127.0.0.1:2379",),
        "etcd endpoints, comma separated",
        kind=URL_LIST,
        flag=("--etcd", "--pd"),
    )
    upstream: str = setting(
        "",
        "the upstream MySQL/MariaDB as a URL: mysql://user:password@host:port/?server-id=N",
        secret=True,
    )
    cluster_id: str = setting("default", "capture cluster id (the etcd key prefix)")
    capture_id: str = setting("", "this capture's id (default: a new UUID at every start)")
    capture_session_ttl: int = setting(
        10, "seconds the capture's etcd lease lives without keepalive"
    )
    owner_flush_interval: float = setting(
        0.2, "seconds between two owner reactor ticks", kind=DURATION
    )
    processor_flush_interval: float = setting(
        0.2, "seconds between two processor reactor ticks", kind=DURATION
    )
    checkpoint_interval: float = setting(
        1.0, "seconds between two checkpoint writes of a changefeed's status", kind=DURATION
    )
    log: LogSettings = group(LogSettings, "logging", inline=True)
    security: SecuritySettings = group(SecuritySettings, "TLS for the HTTP API")

    def validate(self) -> Iterator[tuple[str, str]]:
        if not self.upstream:
            yield "upstream", "required: the MySQL/MariaDB URL the changefeeds read"
        elif not self.upstream.startswith("mysql://"):
            yield "upstream", "must be a mysql:// URL"
        if not valid_id(self.cluster_id):
            yield "cluster-id", "use letters, digits and inner dashes"
        if self.capture_session_ttl < 1:
            yield "capture-session-ttl", "must be at least 1 second"
        for key, value in (
            ("owner-flush-interval", self.owner_flush_interval),
            ("processor-flush-interval", self.processor_flush_interval),
            ("checkpoint-interval", self.checkpoint_interval),
        ):
            if value <= 0:
                yield key, "must be positive"
