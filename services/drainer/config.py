"""Drainer settings: drainer.toml's keys, ``DRAINER_*`` environment variables and flags.

Precedence: defaults < ``--config`` TOML file < environment < flags. Every
problem is reported at once by the shared loader (``settings.load``). Keys
tidb-binlog does not have: ``status-addr`` (HTTP on its own port),
``heartbeat-interval`` and ``checkpoint-interval`` (fixed at 1 s and 3 s there)
and ``syncer.sink-uri`` (the sink, chosen by URL scheme).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from settings import (
    DURATION,
    HOST_PORT,
    URL_LIST,
    SecuritySettings,
    choice,
    group,
    setting,
)


@dataclass(frozen=True)
class SyncerConfig:
    """``[syncer]``: where merged binlogs go."""

    sink_uri: str = setting(
        "print://", "sink by URL scheme: print:// (one line per binlog), blackhole://"
    )


@dataclass(frozen=True)
class DrainerConfig:
    """Everything ``binlog-drainer`` can be told."""

    addr: str = setting("127.0.0.1:8249", "gRPC listen address (host:port)", kind=HOST_PORT)
    advertise_addr: str = setting(
        "", "address pumps use to reach this drainer (default: addr)", kind=HOST_PORT
    )
    status_addr: str = setting(
        "",
        "HTTP ops API address (status, state, metrics, health); empty = gRPC port + 1",
        kind=HOST_PORT,
    )
    data_dir: str = setting("data.drainer", "directory of the savepoint and node id")
    node_id: str = setting("", "node id (default: kept in <data-dir>/.node, else hostname:port)")
    pd_urls: tuple[str, ...] = setting(
        ("http://127.0.0.1:2379",), "etcd endpoints, comma separated", kind=URL_LIST
    )
    detect_interval: float = setting(
        5.0, "seconds between two listings of the pump records", kind=DURATION
    )
    initial_commit_ts: int = setting(
        -1,
        "commit ts to start after when there is no checkpoint yet; -1 = the current TSO time",
    )
    compressor: str = setting(
        "", "compression of the pull stream: only '' (none) is supported", kind=choice("", "gzip")
    )
    synced_check_time: float = setting(
        5.0, "minutes without a binlog applied after which /status reports Synced"
    )
    cache_binlog_count: int = setting(8, "merged binlogs queued for the sink")
    heartbeat_interval: float = setting(1.0, "seconds between registry heartbeats", kind=DURATION)
    checkpoint_interval: float = setting(
        3.0, "seconds between two checkpoint saves (and one at shutdown)", kind=DURATION
    )
    log_level: str = setting(
        "info",
        "log level",
        kind=choice("debug", "info", "warn", "warning", "error"),
        flag=("-L", "--log-level"),
    )
    log_format: str = setting("text", "log format", kind=choice("text", "json"))
    log_file: str = setting("", "log file (default: stderr)")
    syncer: SyncerConfig = group(SyncerConfig, "the sink")
    security: SecuritySettings = group(SecuritySettings, "TLS for gRPC and HTTP")

    @property
    def advertise(self) -> str:
        return self.advertise_addr or self.addr

    def validate(self) -> Iterator[tuple[str, str]]:
        host = self.advertise.rsplit(":", 1)[0]
        if host in ("0.0.0.0", "::", "[::]"):
            yield "advertise-addr", "must be an address pumps can reach, not a wildcard"
        if self.compressor:
            yield "compressor", "gzip is not supported by this drainer's pull stream; use ''"
        if self.initial_commit_ts < -1:
            yield "initial-commit-ts", "must be -1 (the current TSO time) or a commit ts >= 0"
        for key, value in (
            ("detect-interval", self.detect_interval),
            ("heartbeat-interval", self.heartbeat_interval),
            ("checkpoint-interval", self.checkpoint_interval),
            ("synced-check-time", self.synced_check_time),
        ):
            if value <= 0:
                yield key, "must be positive"
        if self.cache_binlog_count < 1:
            yield "cache-binlog-count", "must be at least 1"
