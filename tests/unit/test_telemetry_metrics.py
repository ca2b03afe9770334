"""Per-service metric registries and the exposition of tidb-binlog-named families."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tributary.telemetry import Metrics, exponential_buckets, fq_name, render


class PumpMetrics(Metrics):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.rpc_duration = self.histogram(
            "binlog_pump_rpc_duration_seconds",
            "gRPC latency by method and outcome",
            ["method", "label"],
            buckets=exponential_buckets(0.00005, 2, 4),
        )
        self.storage_errors = self.exact_counter(
            "binlog_pump_storage_error_count", "storage errors by type", ["type"]
        )
        self.max_commit_ts = self.gauge("binlog_pump_storage_max_commit_ts", "max commit ts")
        self.writes = self.counter("tributary_pump_writes", "binlogs written")


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def test_two_instances_do_not_collide_or_touch_the_global_registry() -> None:
    a, b = PumpMetrics(), PumpMetrics()
    a.storage_errors.labels(type="write").inc(2)
    b.storage_errors.labels(type="write").inc()
    got_a, got_b = samples(a.render()), samples(render(b.registry))
    key = ("binlog_pump_storage_error_count", (("type", "write"),))
    assert (got_a[key], got_b[key]) == (2.0, 1.0)
    assert REGISTRY.get_sample_value("binlog_pump_storage_error_count", {"type": "write"}) is None


def test_names_as_tidb_binlog_exposes_them() -> None:
    m = PumpMetrics()
    m.rpc_duration.labels(method="WriteBinlog", label="succ").observe(0.00008)
    m.max_commit_ts.set(1 << 40)
    m.writes.inc()
    text = m.render().decode()
    assert "# TYPE binlog_pump_storage_error_count untyped" in text
    got = samples(m.render())
    labels = (("label", "succ"), ("method", "WriteBinlog"))

    def bucket(le: str) -> float:
        key = tuple(sorted((*labels, ("le", le))))
        return got[("binlog_pump_rpc_duration_seconds_bucket", key)]

    assert (bucket("5e-05"), bucket("0.0001"), bucket("+Inf")) == (0, 1, 1)
    assert got[("binlog_pump_rpc_duration_seconds_count", labels)] == 1
    assert got[("binlog_pump_storage_max_commit_ts", ())] == float(1 << 40)
    assert got[("tributary_pump_writes_total", ())] == 1


def test_exact_counter_only_goes_up() -> None:
    c = PumpMetrics().storage_errors.labels(type="read")
    with pytest.raises(ValueError):
        c.inc(-1)
    with pytest.raises(TypeError):
        c.dec()
    with pytest.raises(TypeError):
        c.set(3)


def test_process_metrics_are_opt_in() -> None:
    assert "process_" not in Metrics().render().decode()
    assert "process_cpu_seconds_total" in Metrics(process_metrics=True).render().decode()


def test_exponential_buckets_like_go() -> None:
    assert exponential_buckets(1, 2, 4) == (1, 2, 4, 8)
    with pytest.raises(ValueError):
        exponential_buckets(0, 2, 3)


def test_names_are_built_as_go_builds_them() -> None:
    calls: list[int] = []
    m = Metrics(namespace="binlog", subsystem="pump", before_scrape=lambda: calls.append(1))
    m.gauge("gc_ts", "purged up to", subsystem="pump_storage").set(7)
    m.exact_counter("error_count", "errors", ["type"], subsystem="pump_storage")
    m.counter("detected_drainer_binlog_purge", "purge alerts").inc()
    m.histogram("rpc_duration_seconds", "latency", buckets=(0.5,)).observe(0.1)
    got = samples(m.render())
    assert calls == [1]  # the hook ran once, before the families were read
    assert got[("binlog_pump_storage_gc_ts", ())] == 7
    assert got[("binlog_pump_detected_drainer_binlog_purge_total", ())] == 1
    assert got[("binlog_pump_rpc_duration_seconds_bucket", (("le", "0.5"),))] == 1
    assert "# TYPE binlog_pump_storage_error_count untyped" in m.render().decode()
    assert fq_name("ticdc", "", "owner_ownership") == "ticdc_owner_ownership"
    assert Metrics().name("plain") == "plain"


def test_plain_counter_reads_its_totals_on_every_scrape() -> None:
    m = Metrics(namespace="binlog", subsystem="drainer")
    totals: dict[str, int] = {}
    m.plain_counter("events", "counted elsewhere", "type", lambda: totals, subsystem="x")
    text = m.render().decode()
    assert "# TYPE binlog_x_events_total counter" in text  # declared before any series
    assert samples(m.render()) == {}
    totals.update(ok=2, failed=0)
    got = samples(m.render())
    assert got[("binlog_x_events_total", (("type", "ok"),))] == 2
    assert got[("binlog_x_events_total", (("type", "failed"),))] == 0
    totals["ok"] = 5
    assert samples(m.render())[("binlog_x_events_total", (("type", "ok"),))] == 5
