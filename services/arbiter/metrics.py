"""The arbiter's Prometheus metrics, under tidb-binlog's ``binlog_arbiter_*`` names.

``checkpoint_tso`` (physical ms of the checkpoint), ``event{type}`` (Insert, Update, Delete, DDL,
Txn), ``query_duration_time{type="exec"}`` (seconds a sink batch took),
``txn_latency_seconds`` (apply time minus the upstream commit time); ours:
``skipped_message_count`` (malformed messages passed over with skip-malformed).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tributary.change import RowKind, Txn
from tributary.telemetry import Metrics, exponential_buckets
from tributary.wire.ts import physical_ms

_KIND = {RowKind.INSERT: "Insert", RowKind.UPDATE: "Update", RowKind.DELETE: "Delete"}


class ArbiterMetrics(Metrics):
    def __init__(self) -> None:
        super().__init__(namespace="binlog", subsystem="arbiter", process_metrics=True)
        self.checkpoint_tso = self.gauge("checkpoint_tso", "checkpoint: physical time in ms")
        self.event = self.exact_counter("event", "events applied", ("type",))
        self.query_duration = self.histogram(
            "query_duration_time",
            "seconds to apply a batch downstream",
            ("type",),
            exponential_buckets(0.00025, 2, 18),
        )
        self.txn_latency = self.histogram(
            "txn_latency_seconds",
            "apply time minus the upstream commit time",
            buckets=exponential_buckets(0.001, 2, 20),
        )
        self.skipped_messages = self.exact_counter(
            "skipped_message_count", "malformed messages skipped (skip-malformed)"
        )

    def applied(self, txns: Sequence[Txn], seconds: float) -> None:
        self.query_duration.labels("exec").observe(seconds)
        counts: dict[str, int] = {}
        for t in txns:
            if t.ddl is not None:
                counts["DDL"] = counts.get("DDL", 0) + 1
                continue
            counts["Txn"] = counts.get("Txn", 0) + 1
            for r in t.rows:
                kind = _KIND[r.kind]
                counts[kind] = counts.get(kind, 0) + 1
        for kind, n in counts.items():
            self.event.labels(kind).inc(n)
        now_ms = time.time() * 1000
        self.txn_latency.observe(max(0.0, now_ms - physical_ms(txns[-1].commit_ts)) / 1000)
        self.checkpoint_tso.set(physical_ms(txns[-1].commit_ts))

    def skipped(self) -> None:
        self.skipped_messages.inc()
