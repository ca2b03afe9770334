"""Pump settings: pump.toml's keys, ``PUMP_*`` environment variables and flags.

Precedence: defaults < ``--config`` TOML file < environment < flags. Every
problem is reported at once by the shared loader (``settings.load``). tidb-binlog's stock
``pump.toml`` and its flags (``-config=``, ``-L``, ``-pd-urls=`` ...) load as they are; its keys
and flags this pump does not implement are listed in ``IGNORED`` with the reason a warning gives.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from tributary.settings import (
    BYTE_SIZE,
    DAYS_OR_DURATION,
    DURATION,
    OPTIONAL_HOST_PORT,
    URL_LIST,
    Ignored,
    ListenSettings,
    LogSettings,
    SecuritySettings,
    choice,
    group,
    setting,
)

GiB = 1 << 30
MiB = 1 << 20

_NO_PUSH = "no Prometheus push gateway: scrape /metrics on the HTTP port"
_DEPRECATED = "deprecated in tidb-binlog, without effect there too"

IGNORED = (
    Ignored(
        "socket",
        "no unix-socket listener: writers reach the pump over TCP at addr",
        flags=("--socket",),
    ),
    Ignored(
        "storage.kv", "tuning of goleveldb, which this pump does not use (its index is SQLite)"
    ),
    Ignored("metrics-addr", _NO_PUSH, flags=("--metrics-addr",)),
    Ignored("metrics-interval", _NO_PUSH, flags=("--metrics-interval",)),
    Ignored(
        "enable-debug",
        "debug logging is log-level = debug (-L debug)",
        flags=("--enable-debug",),
        switch=True,
    ),
    Ignored("binlog-file-size", _DEPRECATED, flags=("--binlog-file-size",)),
    Ignored("enable-binlog-slice", _DEPRECATED, flags=("--enable-binlog-slice",), switch=True),
    Ignored("binlog-slice-size", _DEPRECATED, flags=("--binlog-slice-size",)),
    Ignored("log-rotate", _DEPRECATED, flags=("--log-rotate",)),
)


@dataclass(frozen=True)
class StorageConfig:
    """``[storage]``: the value log, its index and the write path."""

    sync_log: bool = setting(True, "fdatasync every group-commit batch before acknowledging it")
    kv_chan_cap: int = setting(
        1 << 20, "write requests queued for the writer before callers wait", toml="kv_chan_cap"
    )
    slow_write_threshold: float = setting(
        1.0, "seconds; a batch slower than this is logged", toml="slow_write_threshold"
    )
    stop_write_at_available_space: int = setting(
        10 * GiB, "free bytes at or below which prewrites are refused", kind=BYTE_SIZE
    )
    segment_size: int = setting(
        500 * MiB, "bytes after which a value-log segment is finalized", kind=BYTE_SIZE
    )
    max_txn_timeout: float = setting(
        600.0,
        "seconds a prewrite may wait for its commit before stuck-prewrite-action applies",
        kind=DURATION,
    )
    stuck_prewrite_action: str = setting(
        "wait",
        "a prewrite past max-txn-timeout: wait (keep it, alert: nothing lost) or rollback"
        " (drop it, as before)",
        kind=choice("wait", "rollback"),
    )


@dataclass(frozen=True)
class PumpConfig:
    """Everything ``binlog-pump`` can be told."""

    ignored_keys: ClassVar[tuple[Ignored, ...]] = IGNORED
    listen: ListenSettings = group(
        ListenSettings,
        "the gRPC listen address",
        inline=True,
        default=ListenSettings("127.0.0.1:8250"),
    )
    status_addr: str = setting(
        "",
        "an extra address of the HTTP ops API (status, metrics ...), also served on the gRPC port",
        kind=OPTIONAL_HOST_PORT,
    )
    data_dir: str = setting("data.pump", "directory of the value log, index and node id")
    node_id: str = setting("", "node id (default: kept in <data-dir>/.node, else hostname:port)")
    pd_urls: tuple[str, ...] = setting(
        ("http://127.0.0.1:2379",), "etcd endpoints, comma separated", kind=URL_LIST
    )
    heartbeat_interval: float = setting(2.0, "seconds between registry heartbeats", kind=DURATION)
    registration_timeout: float = setting(
        10.0,
        "seconds without a successful registry write (etcd unreachable) after which the pump "
        "refuses prewrites, until a heartbeat gets through again",
        kind=DURATION,
    )
    gen_binlog_interval: float = setting(
        3.0,
        "seconds of idleness after which a fake binlog is written",
        kind=DURATION,
        flag=("--gen-binlog-interval", "--fake-binlog-interval"),
    )
    gc: float = setting(
        7 * 86400.0,
        "binlog retention: days (an integer) or a duration such as 8h",
        kind=DAYS_OR_DURATION,
    )
    gc_interval: float = setting(3600.0, "seconds between two GC rounds", kind=DURATION)
    max_message_size: int = setting(
        (1 << 31) - 4 * MiB, "largest gRPC message accepted, bytes", kind=BYTE_SIZE
    )
    embedded_tso: bool = setting(
        True, "run a TSO member inside this pump (it campaigns for TSO leadership)"
    )
    rejoin: bool = setting(
        False,
        "start although this data directory's pump was taken offline (removes its OFFLINE "
        "marker; without it such a pump refuses to start)",
    )
    front_processes: int = setting(
        0,
        "processes serving the port (SO_REUSEPORT) and handing batches to the one storage"
        " writer process; 0: one per CPU, 1: a single process serves and stores",
    )
    log: LogSettings = group(LogSettings, "logging", inline=True)
    storage: StorageConfig = group(StorageConfig, "value log and index")
    security: SecuritySettings = group(SecuritySettings, "TLS for gRPC and HTTP")

    def validate(self) -> Iterator[tuple[str, str]]:
        if self.listen.wildcard_advertise:
            yield "advertise-addr", "must be an address other nodes can reach, not a wildcard"
        if self.heartbeat_interval <= 0:
            yield "heartbeat-interval", "must be positive"
        if self.registration_timeout <= self.heartbeat_interval:
            yield "registration-timeout", "must be longer than heartbeat-interval"
        if self.gen_binlog_interval <= 0:
            yield "gen-binlog-interval", "must be positive"
        if self.gc <= 0:
            yield "gc", "must be positive"
        if self.front_processes < 0:
            yield "front-processes", "must be 0 (one per CPU) or more"

    @property
    def fronts(self) -> int:
        """How many front processes serve the port (``front-processes``, 0 resolved); 1
        means none: the pump's one process serves and stores."""
        if self.front_processes:
            return self.front_processes
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
