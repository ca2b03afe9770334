"""The capture's Prometheus metrics (TiCDC's ``ticdc_*`` names where they exist).

Processors keep plain numbers; a collector copies them into the registry on every scrape, so
the replication path never touches prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from services.capture.capture import Capture
from tributary.telemetry import Metrics


class _Snapshot:
    """Reads the capture's state on every scrape."""

    def __init__(self, capture: Callable[[], Capture | None]) -> None:
        self._capture = capture

    def collect(self) -> Iterator[Metric]:
        capture = self._capture()
        owner = GaugeMetricFamily("ticdc_owner_ownership", "1 while this capture is the owner")
        owner.add_metric([], 1.0 if capture is not None and capture.is_owner() else 0.0)
        yield owner
        checkpoint = GaugeMetricFamily(
            "ticdc_processor_checkpoint_ts",
            "commit ts of the last transaction a processor applied",
            labels=["namespace", "changefeed"],
        )
        rows = GaugeMetricFamily(
            "ticdc_processor_applied_rows",
            "row changes a processor applied since it started",
            labels=["namespace", "changefeed"],
        )
        running = capture.manager.running if capture is not None and capture.manager else {}
        for feed, run in running.items():
            labels = [feed.namespace, feed.id]
            checkpoint.add_metric(labels, float(run.processor.checkpoint_ts))
            rows.add_metric(labels, float(run.processor.applied_rows))
        yield checkpoint
        yield rows


class CaptureMetrics(Metrics):
    def __init__(self, capture: Callable[[], Capture | None]) -> None:
        registry = CollectorRegistry()
        registry.register(_Snapshot(capture))
        super().__init__(registry, process_metrics=True)
