"""The pump's Prometheus metrics, under tidb-binlog's ``binlog_pump_*`` names.

Storage keeps plain numbers (``StorageStats``); :meth:`PumpMetrics.sync` copies
them into the registry just before each scrape, so the hot path never touches
prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from services.pump.storage import StorageStats
from tributary.telemetry import Metrics, exponential_buckets


class _BeforeScrape:
    """A collector that yields nothing but runs a hook first on every scrape."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self._hook = hook

    def collect(self) -> Iterator[Metric]:
        self._hook()
        return iter(())


class PumpMetrics(Metrics):
    def __init__(self, before_scrape: Callable[[], None] = lambda: None) -> None:
        registry = CollectorRegistry()
        # Registered first, so it runs before the families below are read.
        registry.register(_BeforeScrape(before_scrape))
        super().__init__(registry, process_metrics=True)
        self.rpc_duration = self.histogram(
            "binlog_pump_rpc_duration_seconds",
            "gRPC call latency by method and outcome",
            ("method", "label"),
            buckets=exponential_buckets(0.00005, 2, 22),
        )
        self.max_commit_ts = self.gauge(
            "binlog_pump_storage_max_commit_ts", "highest commit ts the sorter released"
        )
        self.gc_ts = self.gauge("binlog_pump_storage_gc_ts", "binlogs at or below are purged")
        self.done_gc_ts = self.gauge(
            "binlog_pump_storage_done_gc_ts", "ts up to which purged data was actually deleted"
        )
        self.deleted_kv = self.gauge(
            "binlog_pump_storage_deleted_kv_total", "index rows deleted by GC"
        )
        self.storage_size = self.gauge(
            "binlog_pump_storage_storage_size_bytes", "disk capacity and free space", ("type",)
        )
        self.errors = self.gauge(
            "binlog_pump_storage_error_count", "storage errors by type", ("type",)
        )
        self.loss = self.gauge(
            "binlog_pump_loss_binlog_count", "binlogs lost to corruption (skipped or unreadable)"
        )
        self.resolved = self.gauge(
            "binlog_pump_storage_query_tikv_count",
            "prewrites past max-txn-timeout settled by the resolver, by outcome",
            ("outcome",),
        )
        self.purge_alert = self.counter(
            "binlog_pump_detected_drainer_binlog_purge",
            "times a drainer's checkpoint was found near or behind the GC ts",
            ("drainer",),
        )
        self.written = self.gauge("binlog_pump_binlogs_written", "binlogs stored since start")

    def sync(self, stats: StorageStats, written: int) -> None:
        self.max_commit_ts.set(stats.max_commit_ts)
        self.gc_ts.set(stats.gc_ts)
        self.done_gc_ts.set(stats.done_gc_ts)
        self.deleted_kv.set(stats.deleted_kv_total)
        self.storage_size.labels("available").set(stats.available_bytes)
        for kind, n in stats.error_count.items():
            self.errors.labels(kind).set(n)
        self.loss.set(stats.loss_binlog_count)
        for outcome, n in stats.resolved.items():
            self.resolved.labels(outcome).set(n)
        self.written.set(written)
