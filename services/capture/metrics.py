"""The capture's Prometheus metrics (TiCDC's ``ticdc_*`` names and labels where they exist).

Processors and the owner keep plain numbers; ``CaptureMetrics.sync`` copies them into the
registry just before each scrape, so the replication path never touches prometheus_client.

* ``ticdc_owner_*`` (only the owner capture has children): per changefeed ``checkpoint_ts``,
  ``checkpoint_ts_lag``, ``resolved_ts``, ``resolved_ts_lag`` (seconds between now and the
  ts's physical time) and ``status`` (TiCDC's state numbers), labels ``namespace`` and
  ``changefeed``, from the figures of the owner's last tick (etcd's status and task positions).
* ``ticdc_processor_*`` (the capture running the processor): ``checkpoint_ts``,
  ``checkpoint_ts_lag``, ``resolved_ts``, ``resolved_ts_lag``, ``exit_with_error_count``, same
  labels, from the processor itself; plus ours, ``applied_rows``, and
  ``ticdc_processor_sink_info{namespace,changefeed,scheme,protocol}`` (always 1): the sink's URL
  scheme and the protocol it writes (``protocol_label``), so every other series of a changefeed
  can be grouped by protocol with a join on ``namespace, changefeed``.
* ``ticdc_sink_pump_client_events_total{namespace,changefeed,type}`` (ours): the counters of
  the pump clients of a changefeed's ``pump://`` sinks on this capture
  (``pumpclient.ClientStats``, ``type`` the field name: ``prewrites_ok``, ``rpc_errors``,
  ``retries``, ...), summed over every sink this process opened for it, read at scrape time; no
  series before a ``pump://`` sink opens. A changefeed that moves to another capture or is
  removed keeps its totals here until this process ends (they only grow).

Lags use this capture's clock; the ts are the upstream's clock (``mysqlsource.timestamps``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from urllib.parse import parse_qsl, urlsplit

from prometheus_client import Gauge

from services.capture.capture import Capture
from tributary.cdc.model import FeedState
from tributary.telemetry import Metrics
from tributary.wire.ts import physical_ms

# TiCDC's model.FeedState.ToInt() as ticdc_owner_status shows it.
STATE_NUMBERS = {
    FeedState.NORMAL: 0,
    FeedState.FAILED: 2,
    FeedState.STOPPED: 3,
    FeedState.FINISHED: 4,
    FeedState.REMOVED: 5,
    FeedState.WARNING: 6,
}

FEED = ("namespace", "changefeed")
# the protocol a sink writes when its URL names none (file:// without one: tidb-binlog's files)
DEFAULT_PROTOCOLS = {"kafka": "tidb-binlog", "file": "tidb-binlog", "s3": "csv"}


def protocol_label(sink_uri: str) -> tuple[str, str]:
    """(scheme, protocol) of a changefeed's sink URL: Kafka's and the storage sink's
    ``protocol`` parameter (or its default), "" for sinks without one (mysql, sqlite, pump, ...).
    Only these two are read: the URL's password never reaches a label."""
    url = urlsplit(sink_uri)
    if url.scheme not in DEFAULT_PROTOCOLS:
        return url.scheme, ""
    given = [v for k, v in parse_qsl(url.query) if k == "protocol"]
    return url.scheme, given[0] if given else DEFAULT_PROTOCOLS[url.scheme]


def lag_seconds(ts: int, now: float) -> float:
    return max(0.0, now - physical_ms(ts) / 1000) if ts else 0.0


class CaptureMetrics(Metrics):
    def __init__(
        self,
        capture: Callable[[], Capture | None],
        clock: Callable[[], float] = time.time,
        *,
        pump_client: Callable[[], Mapping[tuple[str, ...], int]] = dict,
    ) -> None:
        super().__init__(namespace="ticdc", before_scrape=self.sync, process_metrics=True)
        self._capture = capture
        self._clock = clock
        self.owner = self.gauge("ownership", "1 while this capture is the owner", subsystem="owner")
        self.owner_checkpoint = self._gauge(
            "owner", "checkpoint_ts", "checkpoint ts of changefeeds"
        )
        self.owner_checkpoint_lag = self._gauge(
            "owner", "checkpoint_ts_lag", "checkpoint ts lag of changefeeds in seconds"
        )
        self.owner_resolved = self._gauge("owner", "resolved_ts", "resolved ts of changefeeds")
        self.owner_resolved_lag = self._gauge(
            "owner", "resolved_ts_lag", "resolved ts lag of changefeeds in seconds"
        )
        self.owner_status = self._gauge("owner", "status", "the state of changefeeds")
        self.checkpoint = self._gauge(
            "processor", "checkpoint_ts", "commit ts of the last transaction a processor applied"
        )
        self.checkpoint_lag = self._gauge(
            "processor", "checkpoint_ts_lag", "processor checkpoint ts lag in seconds"
        )
        self.resolved = self._gauge(
            "processor", "resolved_ts", "the highest ts a processor read from the upstream"
        )
        self.resolved_lag = self._gauge(
            "processor", "resolved_ts_lag", "processor resolved ts lag in seconds"
        )
        self.errors = self.exact_counter(
            "exit_with_error_count",
            "errors a processor met (it retries the retriable ones)",
            FEED,
            subsystem="processor",
        )
        self.rows = self._gauge(
            "processor", "applied_rows", "row changes a processor applied since it started"
        )
        self.sink_info = self.gauge(
            "sink_info",
            "1 per changefeed running here, labelled with its sink's scheme and protocol",
            (*FEED, "scheme", "protocol"),
            subsystem="processor",
        )
        self.pump_client = self.plain_counter(
            "events",
            "what the pump clients of a changefeed's pump:// sinks counted, by counter",
            (*FEED, "type"),
            pump_client,
            subsystem="sink_pump_client",
        )

    def _gauge(self, subsystem: str, name: str, documentation: str) -> Gauge:
        return self.gauge(name, documentation, FEED, subsystem=subsystem)

    def sync(self) -> None:
        capture = self._capture()
        now = self._clock()
        owning = capture is not None and capture.is_owner()
        owner = capture.owner if capture is not None and owning else None
        self.owner.set(1.0 if owning else 0.0)
        owner_families = (
            self.owner_checkpoint,
            self.owner_checkpoint_lag,
            self.owner_resolved,
            self.owner_resolved_lag,
            self.owner_status,
        )
        for family in owner_families:
            family.clear()
        for feed, (state, p) in (owner.figures if owner is not None else {}).items():
            labels = (feed.namespace, feed.id)
            self.owner_checkpoint.labels(*labels).set(p.checkpoint_ts)
            self.owner_checkpoint_lag.labels(*labels).set(lag_seconds(p.checkpoint_ts, now))
            self.owner_resolved.labels(*labels).set(p.resolved_ts)
            self.owner_resolved_lag.labels(*labels).set(lag_seconds(p.resolved_ts, now))
            self.owner_status.labels(*labels).set(STATE_NUMBERS[state])
        processor_families = (
            self.checkpoint,
            self.checkpoint_lag,
            self.resolved,
            self.resolved_lag,
            self.errors,
            self.rows,
            self.sink_info,
        )
        for family in processor_families:
            family.clear()
        running = capture.manager.running if capture is not None and capture.manager else {}
        for feed, run in running.items():
            labels = (feed.namespace, feed.id)
            proc = run.processor
            self.checkpoint.labels(*labels).set(proc.checkpoint_ts)
            self.checkpoint_lag.labels(*labels).set(lag_seconds(proc.checkpoint_ts, now))
            self.resolved.labels(*labels).set(proc.resolved_ts)
            self.resolved_lag.labels(*labels).set(lag_seconds(proc.resolved_ts, now))
            self.errors.labels(*labels).inc(proc.errors)  # cleared above: now the total
            self.rows.labels(*labels).set(proc.applied_rows)
            self.sink_info.labels(*labels, *protocol_label(proc.info.sink_uri)).set(1)
