"""``binlog-status`` settings: TOML keys, ``STATUS_*`` environment variables and flags
(precedence defaults < ``--config`` file < environment < flags).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tributary.settings import (
    DURATION,
    STR_LIST,
    URL_LIST,
    ListenSettings,
    LogSettings,
    SecuritySettings,
    group,
    setting,
)

DEFAULT_ADDR = "127.0.0.1:8288"


@dataclass(frozen=True)
class StatusConfig:
    """Everything ``binlog-status`` can be told."""

    listen: ListenSettings = group(
        ListenSettings,
        "the page's HTTP listen address",
        inline=True,
        default=ListenSettings(DEFAULT_ADDR),
    )
    pd_urls: tuple[str, ...] = setting(
        ("http://127.0.0.1:2379",),
        "etcd (or PD) endpoints holding the registry and the capture keys, comma separated",
        kind=URL_LIST,
        flag=("--pd-urls", "--etcd"),
    )
    cdc_clusters: tuple[str, ...] = setting(
        (),
        "capture cluster ids to show (empty: every cluster found under /tidb/cdc/)",
        kind=STR_LIST,
    )
    sample_interval: float = setting(
        5.0,
        "seconds between two samples of the cluster (the page itself polls every 3 s)",
        kind=DURATION,
    )
    history: float = setting(
        3600.0, "seconds of samples kept in memory for the lag charts", kind=DURATION
    )
    node_timeout: float = setting(
        2.0, "seconds a pump's or drainer's HTTP API gets to answer one sample", kind=DURATION
    )
    log: LogSettings = group(LogSettings, "logging", inline=True)
    security: SecuritySettings = group(
        SecuritySettings, "TLS: the page's own and the client side toward pumps and drainers"
    )

    def validate(self) -> Iterator[tuple[str, str]]:
        if self.sample_interval <= 0:
            yield "sample-interval", "must be positive"
        if self.history < self.sample_interval:
            yield "history", "must be at least one sample interval"
        if self.node_timeout <= 0:
            yield "node-timeout", "must be positive"
