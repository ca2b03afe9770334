"""The pump's Prometheus metrics, under tidb-binlog's ``binlog_pump_*`` names.

Storage keeps plain numbers (``StorageStats``); :meth:`PumpMetrics.sync` copies
them into the registry just before each scrape, so the hot path never touches
prometheus_client.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from services.pump.storage import StorageStats
from services.pump.storage.stats import Distribution
from tributary.telemetry import Metrics, exponential_buckets, fq_name

STORAGE = "pump_storage"  # tidb-binlog's subsystem of the storage families
RPC_BUCKETS = exponential_buckets(0.00005, 2, 18)  # rpc_duration_seconds: 50 us .. ~6.6 s


@dataclass(frozen=True, slots=True)
class Observed:
    """One histogram child's observations over a span of time (``counts`` per bucket); a front
    process ships them to the writer in ``OBSERVED`` frames (``split.frames``)."""

    method: str
    label: str
    counts: tuple[int, ...]
    total: float


class PumpMetrics(Metrics):
    def __init__(self, before_scrape: Callable[[], None] = lambda: None) -> None:
        super().__init__(
            namespace="binlog", subsystem="pump", before_scrape=before_scrape, process_metrics=True
        )
        # plain numbers: the front processes' observations are added in (``merge_rpc``)
        self.rpc_duration = self.plain_histogram(
            "rpc_duration_seconds",
            "gRPC call latency by method and outcome",
            ("method", "label"),
            buckets=RPC_BUCKETS,
        )
        self.max_commit_ts = self.gauge(
            "max_commit_ts", "highest commit ts the sorter released", subsystem=STORAGE
        )
        self.gc_ts = self.gauge("gc_ts", "binlogs at or below are purged", subsystem=STORAGE)
        self.done_gc_ts = self.gauge(
            "done_gc_ts", "ts up to which purged data was actually deleted", subsystem=STORAGE
        )
        self.deleted_kv = self.gauge(
            "deleted_kv_total", "index rows deleted by GC", subsystem=STORAGE
        )
        self.storage_size = self.gauge(
            "storage_size_bytes", "disk capacity and free space", ("type",), subsystem=STORAGE
        )
        self.stop_write_floor = self.gauge(
            "stop_write_at_available_space_bytes",
            "the stop-write floor: prewrites are refused at or below this much free space",
            subsystem=STORAGE,
        )
        self.stop_write = self.gauge(
            "stop_write",
            "1 while free space is at or below the stop-write floor (prewrites refused)",
            subsystem=STORAGE,
        )
        self.errors = self.gauge(
            "error_count", "storage errors by type", ("type",), subsystem=STORAGE
        )
        self.loss = self.gauge(
            "loss_binlog_count", "binlogs lost to corruption (skipped or unreadable)"
        )
        self.resolved = self.gauge(
            "query_tikv_count",
            "prewrites past max-txn-timeout settled by the resolver, by outcome",
            ("outcome",),
            subsystem=STORAGE,
        )
        self.stuck = self.gauge(
            "stuck_prewrites",
            "prewrites waiting past max-txn-timeout for their commit (the max commit ts waits)",
            subsystem=STORAGE,
        )
        self.oldest_stuck = self.gauge(
            "oldest_stuck_prewrite_start_ts",
            "start ts of the oldest stuck prewrite (0: none)",
            subsystem=STORAGE,
        )
        self.purge_alert = self.counter(
            "detected_drainer_binlog_purge",
            "times a drainer's checkpoint was found near or behind the GC ts",
            ("drainer",),
        )
        self.written = self.gauge("binlogs_written", "binlogs stored since start")
        self.slow_chaser = self.counter(
            "slow_chaser_count", "slow chaser state changes (none here)", ("type",),
            subsystem=STORAGE,
        )  # fmt: skip
        self.stats: StorageStats | None = None
        self.registry.register(_Distributions(self))

    def observe_rpc(self, method: str, label: str, seconds: float) -> None:
        self.rpc_duration.labels(method, label).observe(seconds)

    def merge_rpc(self, observed: Iterable[Observed]) -> None:
        """Add what a front process observed (``split.observations``)."""
        for o in observed:
            self.rpc_duration.labels(o.method, o.label).merge(o.counts, o.total)

    def sync(self, stats: StorageStats, written: int) -> None:
        self.max_commit_ts.set(stats.max_commit_ts)
        self.gc_ts.set(stats.gc_ts)
        self.done_gc_ts.set(stats.done_gc_ts)
        self.deleted_kv.set(stats.deleted_kv_total)
        self.stats = stats
        self.storage_size.labels("available").set(stats.available_bytes)
        self.storage_size.labels("capacity").set(stats.capacity_bytes)
        self.stop_write_floor.set(stats.stop_write_at_available_space)
        self.stop_write.set(1 if stats.stop_write else 0)
        for kind, n in stats.error_count.items():
            self.errors.labels(kind).set(n)
        self.loss.set(stats.loss_binlog_count)
        for outcome, n in stats.resolved.items():
            self.resolved.labels(outcome).set(n)
        self.written.set(written)
        self.stuck.set(len(stats.stuck_prewrites))
        self.oldest_stuck.set(stats.stuck_prewrites[0] if stats.stuck_prewrites else 0)


class _Distributions:
    """Storage's write size/duration distributions as tidb-binlog's histograms
    (``binlog_pump_storage_write_binlog_size``, ``..._write_binlog_duration_time``, by type)."""

    def __init__(self, metrics: PumpMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        stats = self._metrics.stats
        if stats is None:
            return
        yield _family("write_binlog_size", "write binlog size", stats.write_binlog_size)
        yield _family(
            "write_binlog_duration_time",
            "write time (s) of binlogs",
            stats.write_binlog_duration_time,
        )


def _family(name: str, doc: str, by_type: dict[str, Distribution]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(fq_name("binlog", STORAGE, name), doc, labels=("type",))
    for kind, d in by_type.items():
        cumulative = itertools.accumulate(d.counts)
        buckets = [(repr(b), float(n)) for b, n in zip(d.bounds, cumulative, strict=False)]
        buckets.append(("+Inf", float(d.count)))
        family.add_metric([kind], buckets, d.total)
    return family
