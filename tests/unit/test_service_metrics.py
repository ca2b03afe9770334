"""The services' metric families keep tidb-binlog's and TiCDC's names, types and labels."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.capture.metrics import CaptureMetrics, protocol_label
from services.capture.present import Progress
from services.drainer.metrics import DrainerMetrics
from services.pump.metrics import PumpMetrics
from services.pump.storage import StorageStats
from tributary.cdc.keys import FeedId
from tributary.cdc.model import FeedState


def families(text: bytes) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def test_pump_families() -> None:
    m = PumpMetrics()
    m.rpc_duration.labels("WriteBinlog", "succ").observe(0.001)
    m.errors.labels("write").set(1)
    got = families(m.render())
    assert got["binlog_pump_rpc_duration_seconds"].type == "histogram"
    buckets = [s for s in got["binlog_pump_rpc_duration_seconds"].samples if "le" in s.labels]
    assert len(buckets) == 19 and buckets[0].labels["le"] == "5e-05"  # tidb-binlog: 18 + +Inf
    for name in (
        "binlog_pump_storage_max_commit_ts",
        "binlog_pump_storage_gc_ts",
        "binlog_pump_storage_done_gc_ts",
        "binlog_pump_storage_deleted_kv_total",
        "binlog_pump_storage_storage_size_bytes",
        "binlog_pump_storage_error_count",
        "binlog_pump_storage_query_tikv_count",
        "binlog_pump_loss_binlog_count",
        "binlog_pump_binlogs_written",
    ):
        assert got[name].type == "gauge", name
    assert got["binlog_pump_detected_drainer_binlog_purge"].type == "counter"
    assert "process_cpu_seconds" in got


def test_pump_stop_write_gauges_follow_free_space_and_the_floor() -> None:
    m = PumpMetrics()
    stats = StorageStats(stop_write_at_available_space=64 << 20)
    m.sync(stats, 0)  # not measured yet: no alarm
    got = families(m.render())
    assert got["binlog_pump_storage_stop_write"].samples[0].value == 0
    assert got["binlog_pump_storage_stop_write_at_available_space_bytes"].samples[0].value == (
        64 << 20
    )
    stats.capacity_bytes, stats.available_bytes = 1 << 30, 64 << 20  # at the floor: refused
    m.sync(stats, 0)
    assert families(m.render())["binlog_pump_storage_stop_write"].samples[0].value == 1
    stats.available_bytes += 1
    m.sync(stats, 0)
    assert families(m.render())["binlog_pump_storage_stop_write"].samples[0].value == 0


def test_drainer_families() -> None:
    got = families(DrainerMetrics().render())
    for name in (
        "binlog_drainer_pump_position",
        "binlog_drainer_checkpoint_tso",
        "binlog_drainer_checkpoint_delay_seconds",
        "binlog_drainer_disorder_binlog_count",
        "binlog_drainer_duplicate_binlog_count",
        "binlog_drainer_merged_binlog_count",
        "binlog_drainer_applied_binlog_count",
        "binlog_drainer_catchup_active",
        "binlog_drainer_catchup_ranges_count",
        "binlog_drainer_catchup_rows_count",
        "binlog_drainer_catchup_failed_job_count",
    ):
        assert got[name].type == "gauge", name


def test_capture_families_follow_the_capture_on_every_scrape() -> None:
    info = SimpleNamespace(sink_uri="kafka://k:9092/t?protocol=debezium&partition-num=1")
    processor = SimpleNamespace(
        checkpoint_ts=1005, applied_rows=42, resolved_ts=1007, errors=2, info=info
    )
    manager = SimpleNamespace(
        running={FeedId("default", "cf-1"): SimpleNamespace(processor=processor)}
    )
    figures = {FeedId("default", "cf-1"): (FeedState.WARNING, Progress(1003, 1006, 0, 42))}
    owner = SimpleNamespace(figures=figures)
    capture: Any = SimpleNamespace(is_owner=lambda: True, manager=manager, owner=owner)
    current: list[Any] = []
    m = CaptureMetrics(lambda: current[0] if current else None)

    got = families(m.render())
    assert [s.value for s in got["ticdc_owner_ownership"].samples] == [0.0]
    assert got["ticdc_processor_checkpoint_ts"].samples == []

    current.append(capture)
    got = families(m.render())
    assert [s.value for s in got["ticdc_owner_ownership"].samples] == [1.0]
    labels = {"namespace": "default", "changefeed": "cf-1"}
    (checkpoint,) = got["ticdc_processor_checkpoint_ts"].samples
    (rows,) = got["ticdc_processor_applied_rows"].samples
    assert (checkpoint.labels, checkpoint.value) == (labels, 1005.0)
    assert (rows.labels, rows.value) == (labels, 42.0)
    assert [(s.labels, s.value) for s in got["ticdc_processor_resolved_ts"].samples] == [
        (labels, 1007.0)
    ]
    assert [s.value for s in got["ticdc_processor_exit_with_error_count"].samples] == [2.0]
    assert [s.value for s in got["ticdc_owner_checkpoint_ts"].samples] == [1003.0]
    assert [s.value for s in got["ticdc_owner_resolved_ts"].samples] == [1006.0]
    assert [s.value for s in got["ticdc_owner_status"].samples] == [6.0]  # TiCDC's warning
    assert [s.labels for s in got["ticdc_owner_checkpoint_ts_lag"].samples] == [labels]
    (sink,) = got["ticdc_processor_sink_info"].samples
    assert sink.labels == {**labels, "scheme": "kafka", "protocol": "debezium"} and sink.value == 1

    manager.running = {}  # the feed stopped: its series go away
    assert families(m.render())["ticdc_processor_checkpoint_ts"].samples == []
    assert families(m.render())["ticdc_processor_sink_info"].samples == []


@pytest.mark.parametrize(
    ("uri", "want"),
    [
        ("kafka://k:9092/t", ("kafka", "tidb-binlog")),
        ("kafka://k:9092/t?protocol=canal-json", ("kafka", "canal-json")),
        ("kafka://k:9092/t?topic-rule=x&protocol=avro", ("kafka", "avro")),
        ("file:///out?protocol=csv", ("file", "csv")),
        ("file:///out?protocol=canal-json&file-size=1MiB", ("file", "canal-json")),
        ("file:///out", ("file", "tidb-binlog")),
        ("s3://bucket/prefix?protocol=canal-json", ("s3", "canal-json")),
        ("mysql://u:secret@h:3306/", ("mysql", "")),
        ("pump://e:2379/?name=x", ("pump", "")),
    ],
)
def test_a_changefeeds_sink_protocol_label(uri: str, want: tuple[str, str]) -> None:
    assert protocol_label(uri) == want
