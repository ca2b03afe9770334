"""The capture's Prometheus metrics (TiCDC's ``ticdc_*`` names where they exist).

Processors keep plain numbers; ``CaptureMetrics.sync`` copies them into the registry just
before each scrape, so the replication path never touches prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable

from services.capture.capture import Capture
from tributary.telemetry import Metrics


class CaptureMetrics(Metrics):
    def __init__(self, capture: Callable[[], Capture | None]) -> None:
        super().__init__(namespace="ticdc", before_scrape=self.sync, process_metrics=True)
        self._capture = capture
        self.owner = self.gauge("ownership", "1 while this capture is the owner", subsystem="owner")
        feed = ("namespace", "changefeed")
        self.checkpoint = self.gauge(
            "checkpoint_ts",
            "commit ts of the last transaction a processor applied",
            feed,
            subsystem="processor",
        )
        self.rows = self.gauge(
            "applied_rows",
            "row changes a processor applied since it started",
            feed,
            subsystem="processor",
        )

    def sync(self) -> None:
        capture = self._capture()
        self.owner.set(1.0 if capture is not None and capture.is_owner() else 0.0)
        self.checkpoint.clear()
        self.rows.clear()
        running = capture.manager.running if capture is not None and capture.manager else {}
        for feed, run in running.items():
            self.checkpoint.labels(feed.namespace, feed.id).set(run.processor.checkpoint_ts)
            self.rows.labels(feed.namespace, feed.id).set(run.processor.applied_rows)
