"""The drainer's Prometheus metrics, under tidb-binlog's ``binlog_drainer_*`` names.

The merge, pullers and checkpointer keep plain numbers; ``DrainerMetrics.sync``
copies them into the registry just before each scrape (``before_scrape``), so
the per-binlog path never touches prometheus_client. The histograms observed per
binlog (``read_binlog_size``, ``binlog_reach_duration_time``, per pump) are plain bucket
counts (``tributary.telemetry.PlainHistogram``) the pullers hold; the syncer and the MySQL
sink observe ``execute_duration_time`` and ``query_duration_time{type}`` the same way, per
batch and per downstream query.

Where the families are observed, as in tidb-binlog's drainer:

* ``event{type}``: Insert/Update/Delete row changes and DDLs of each batch the sink accepted;
* ``execute_duration_time``: each accepted ``Sink.apply`` (one batch);
* ``query_duration_time{type}``: ``exec`` and ``commit`` of each downstream transaction of
  the MySQL sink (other sinks have no queries);
* ``binlog_reach_duration_time{nodeID}``, ``read_binlog_size{nodeID}``: each pulled binlog;
* ``ddl_jobs_total``: each DDL job translated; ``error_count{type}``: ``unmarshal_binlog``
  when a pump serves an undecodable binlog (fatal, as in tidb-binlog);
* ``queue_size{name}``: at scrape time, ``merge_<nodeID>`` (a pump's merge inbox),
  ``syncer_input`` (merged binlogs to convert) and ``syncer_buffer`` (transactions waiting
  for the sink);
* ``pump_client_events_total{type}`` (ours): with a ``pump://`` downstream, its pump client's
  counters (``pumpclient.ClientStats``, ``type`` the field name: ``prewrites_ok``,
  ``rpc_errors``, ``retries``, ...), read at scrape time; no series with other downstreams.

``checkpoint_delay_seconds`` stays a gauge (wall clock minus the saved checkpoint, at
scrape time), where tidb-binlog has a histogram: tidb-binlog's dashboard and alert rules do
not read it (they compute the delay from ``checkpoint_tso``), while our status page, chart
dashboard and alert read the gauge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from services.drainer.catchup import CatchUp
from services.drainer.merge import MergeStats
from services.drainer.syncer import EventCounts
from tributary.telemetry import Metrics, exponential_buckets
from tributary.wire.ts import physical_ms


class DrainerMetrics(Metrics):
    def __init__(
        self,
        before_scrape: Callable[[], None] = lambda: None,
        *,
        pump_client: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        super().__init__(
            namespace="binlog",
            subsystem="drainer",
            before_scrape=before_scrape,
            process_metrics=True,
        )
        self.pump_position = self.gauge(
            "pump_position", "commit ts of the last binlog pulled, per pump", ("nodeID",)
        )
        self.checkpoint_tso = self.gauge("checkpoint_tso", "saved checkpoint: physical time in ms")
        self.checkpoint_delay = self.gauge(
            "checkpoint_delay_seconds", "wall-clock time minus the saved checkpoint"
        )
        self.disorder = self.gauge(
            "disorder_binlog_count", "binlogs dropped for arriving below the merge"
        )
        self.duplicate = self.gauge(
            "duplicate_binlog_count", "binlogs dropped as equal-commit-ts duplicates"
        )
        self.merged = self.gauge("merged_binlog_count", "binlogs the merge emitted")
        self.applied = self.gauge("applied_binlog_count", "binlogs the sink accepted")
        fast = exponential_buckets(0.00005, 2, 18)
        self.ddl_jobs = self.counter("ddl_jobs", "DDL jobs applied")  # ddl_jobs_total
        self.errors = self.exact_counter("error_count", "errors by type", ("type",))
        self.errors.labels("unmarshal_binlog")  # exposed as 0 until one happens
        self.events = self.exact_counter("event", "row and DDL events applied", ("type",))
        self.execute = self.plain_histogram(
            "execute_duration_time", "time (s) of one apply to the downstream", buckets=fast
        )
        self.query = self.plain_histogram(
            "query_duration_time", "time (s) of downstream queries", ("type",), buckets=fast
        )
        self.reach = self.plain_histogram(
            "binlog_reach_duration_time",
            "time (s) from a binlog's commit to its arrival at the drainer",
            ("nodeID",),
            buckets=fast,
        )
        self.read_size = self.plain_histogram(
            "read_binlog_size",
            "size of a pulled binlog",
            ("nodeID",),
            buckets=exponential_buckets(16, 2, 25),
        )
        self.queue_size = self.gauge("queue_size", "items waiting in a queue", ("name",))
        self.catchup_active = self.gauge(
            "catchup_active", "1 while a Spark catch-up is staging or running"
        )
        self.catchup_ranges = self.gauge("catchup_ranges_count", "ranges caught up by Spark jobs")
        self.catchup_rows = self.gauge("catchup_rows_count", "row changes caught up by Spark jobs")
        self.catchup_failures = self.gauge(
            "catchup_failed_job_count", "catch-up job runs that failed"
        )
        self.pump_client = self.plain_counter(
            "events",
            "what the pump:// downstream's pump client counted, by counter",
            "type",
            pump_client,
            subsystem="drainer_pump_client",
        )
        self._counted: dict[str, int] = {}  # totals already added to ``events``/``ddl_jobs``

    def observe_query(self, kind: str, seconds: float) -> None:
        """A sink's query timer (``tributary.sinks.QueryTimer``)."""
        self.query.labels(kind).observe(seconds)

    def error(self, kind: str) -> None:
        self.errors.labels(kind).inc()

    def _count(self, key: str, total: int) -> float:
        """How much ``total`` grew since the last scrape."""
        grown = total - self._counted.get(key, 0)
        self._counted[key] = total
        return grown

    def count_applied(self, events: EventCounts, ddl_jobs: int) -> None:
        for label, total in (
            ("Insert", events.insert),
            ("Update", events.update),
            ("Delete", events.delete),
            ("DDL", events.ddl),
        ):
            self.events.labels(label).inc(self._count(label, total))
        self.ddl_jobs.inc(self._count("ddl_jobs", ddl_jobs))

    def queues(self, inboxes: Mapping[str, int], syncer_input: int, syncer_buffer: int) -> None:
        self.queue_size.clear()
        for node_id, size in inboxes.items():
            self.queue_size.labels(f"merge_{node_id}").set(size)
        self.queue_size.labels("syncer_input").set(syncer_input)
        self.queue_size.labels("syncer_buffer").set(syncer_buffer)

    def sync(
        self,
        positions: Mapping[str, int],
        merge: MergeStats,
        saved_ts: int,
        applied: int,
        now: float,
        catchup: CatchUp | None = None,
    ) -> None:
        self.pump_position.clear()
        for node_id, ts in positions.items():
            self.pump_position.labels(node_id).set(ts)
        self.checkpoint_tso.set(physical_ms(saved_ts))
        self.checkpoint_delay.set(max(0.0, now - physical_ms(saved_ts) / 1000))
        self.disorder.set(merge.disorder)
        self.duplicate.set(merge.duplicates)
        self.merged.set(merge.emitted)
        self.applied.set(applied)
        if catchup is not None:
            self.catchup_active.set(int(catchup.active))
            self.catchup_ranges.set(catchup.ranges)
            self.catchup_rows.set(catchup.rows_total)
            self.catchup_failures.set(catchup.failures)
