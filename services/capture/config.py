"""``binlog-cdc server`` settings: TOML keys after TiCDC's server config, ``CDC_*`` environment
variables and flags (precedence defaults < ``--config`` file < environment < flags).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tributary.cdc.keys import valid_id
from tributary.settings import (
    DURATION,
    HOST_PORT,
    URL_LIST,
    SecuritySettings,
    choice,
    group,
    setting,
)


@dataclass(frozen=True)
class CaptureConfig:
    """Everything ``binlog-cdc server`` can be told."""

    addr: str = setting("127.0.0.1:8300", "HTTP API listen address (host:port)", kind=HOST_PORT)
    advertise_addr: str = setting(
        "", "address other captures and clients use for this one (default: addr)", kind=HOST_PORT
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
    log_level: str = setting(
        "info",
        "log level",
        kind=choice("debug", "info", "warn", "warning", "error"),
        flag=("-L", "--log-level"),
    )
    log_format: str = setting("text", "log format", kind=choice("text", "json"))
    log_file: str = setting("", "log file (default: stderr)")
    security: SecuritySettings = group(SecuritySettings, "TLS for the HTTP API")

    @property
    def advertise(self) -> str:
        return self.advertise_addr or self.addr

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
