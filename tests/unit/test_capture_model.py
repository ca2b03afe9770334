"""Capture records, keys and filter rules: TiCDC's JSON field names and key layout."""

from __future__ import annotations

import json

import pytest

from services.capture.errors import BadRequest
from services.capture.rules import table_filter
from tributary.cdc.errors import BadRecord
from tributary.cdc.keys import FeedId, KeyKind, Keys, valid_id
from tributary.cdc.model import (
    AdminJob,
    CaptureInfo,
    ChangeFeedInfo,
    ChangeFeedStatus,
    FeedState,
    ReplicaConfig,
    RunningError,
    TaskPosition,
)

KEYS = Keys("c1")
FEED = FeedId("ns", "cf-1")


def test_key_layout_and_parse_round_trip() -> None:
    assert KEYS.capture_key("a") == b"/tidb/cdc/c1/__cdc_meta__/capture/a"
    assert KEYS.owner_prefix == b"/tidb/cdc/c1/__cdc_meta__/owner/"
    assert KEYS.info_key(FEED) == b"/tidb/cdc/c1/ns/changefeed/info/cf-1"
    assert KEYS.status_key(FEED) == b"/tidb/cdc/c1/ns/changefeed/status/cf-1"
    assert KEYS.task_key("a", FEED) == b"/tidb/cdc/c1/ns/task/position/a/cf-1"
    assert KEYS.parse(KEYS.capture_key("a")) is not None
    parsed = KEYS.parse(KEYS.task_key("a", FEED))
    assert parsed is not None and parsed.kind is KeyKind.TASK
    assert (parsed.name, parsed.feed) == ("a", FEED)
    info = KEYS.parse(KEYS.info_key(FEED))
    assert info is not None and info.kind is KeyKind.INFO and info.feed == FEED
    assert KEYS.parse(b"/tidb/cdc/c1/__cdc_meta__/meta/meta-version") is None
    assert KEYS.parse(b"/tidb/cdc/c2/ns/changefeed/info/x") is None


def test_changefeed_ids() -> None:
    assert valid_id("cf-1") and valid_id("A9")
    assert not valid_id("-cf") and not valid_id("cf_1") and not valid_id("a" * 129)


def test_info_json_uses_ticdc_names_and_round_trips() -> None:
    info = ChangeFeedInfo(
        namespace="ns",
        changefeed_id="cf-1",
        sink_uri="blackhole://",
        start_ts=10,
        target_ts=20,
        state=FeedState.FAILED,
        admin_job_type=AdminJob.STOP,
        config=ReplicaConfig(("shop.*", "!shop.tmp_*"), (5,)),
        error=RunningError("boom", "CDC:X", "h:1", "t", False),
        epoch=7,
    )
    data = json.loads(info.to_json())
    for key in ("upstream-id", "changefeed-id", "sink-uri", "start-ts", "target-ts"):
        assert key in data
    assert data["state"] == "failed" and data["admin-job-type"] == 1
    assert data["config"]["filter"]["rules"] == ["shop.*", "!shop.tmp_*"]
    assert data["error"]["code"] == "CDC:X"
    assert ChangeFeedInfo.from_json(info.to_json()) == info


def test_status_task_capture_round_trip() -> None:
    status = ChangeFeedStatus(42, "bin.000001:120")
    data = json.loads(status.to_json())
    assert data["checkpoint-ts"] == 42 and data["source-position"] == "bin.000001:120"
    assert "min-table-barrier-ts" in data and "admin-job-type" in data
    assert ChangeFeedStatus.from_json(status.to_json()) == ChangeFeedStatus(
        42, "bin.000001:120", 42
    )
    task = TaskPosition(error=RunningError("x"))
    assert TaskPosition.from_json(task.to_json()) == task
    assert set(json.loads(task.to_json())) == {
        "checkpoint-ts",
        "resolved-ts",
        "count",
        "error",
        "warning",
        "last-synced-ts",  # ours
    }
    cap = CaptureInfo("id-1", "127.0.0.1:8300", start_timestamp=5)
    assert set(json.loads(cap.to_json())) == {
        "id",
        "address",
        "version",
        "git-hash",
        "deploy-path",
        "start-timestamp",
    }
    assert CaptureInfo.from_json(cap.to_json()) == cap


def test_bad_records_are_errors() -> None:
    with pytest.raises(BadRecord):
        ChangeFeedInfo.from_json(b"not json")
    with pytest.raises(BadRecord):
        ChangeFeedInfo.from_json(b'{"state": "sleeping"}')
    with pytest.raises(BadRecord):
        ChangeFeedStatus.from_json(b"[]")


def test_filter_rules() -> None:
    f = table_filter(["*.*", "!test.*", "!shop.tmp_*"])
    assert f.allows("shop", "orders") and f.allows("crm", "users")
    assert not f.allows("test", "x") and not f.allows("shop", "tmp_1")
    assert not f.allows("mysql", "user")  # system schemas never replicate
    g = table_filter(["shop.*", "crm.users"])
    assert g.allows("shop", "t") and g.allows("crm", "users")
    assert not g.allows("crm", "orders") and not g.allows("other", "t")
    h = table_filter(["db?.t_[ab]*"])
    assert h.allows("db1", "t_a1") and not h.allows("db12", "t_a1") and not h.allows("db1", "t_c")
    with pytest.raises(BadRequest):
        table_filter(["!test.*"])
    with pytest.raises(BadRequest):
        table_filter(["shop"])


@pytest.mark.parametrize(
    "schema",
    ["mysql", "sys", "SYS", "information_schema", "PERFORMANCE_SCHEMA", "METRICS_SCHEMA",
     "inspection_schema", "dm_heartbeat", "tidb_cdc", "lightning_task_info", "workload_schema"],
)  # fmt: skip
def test_system_schemas_never_replicate_even_when_named(schema: str) -> None:
    for rules in (["*.*"], [f"{schema}.*"], [f"{schema}.sys_config"]):
        f = table_filter(rules)
        assert not f.allows(schema, "sys_config") and not f.allows(schema)
    assert table_filter(["*.*"]).allows("system", "t")  # only those names


def test_a_requested_replica_config_refuses_unknown_keys_by_name() -> None:
    from tributary.cdc.model import ReplicaConfig

    ok = {"case-sensitive": True, "filter": {"rules": ["a.*"], "ignore-txn-start-ts": [5]}}
    assert ReplicaConfig.from_dict(ok, strict=True) == ReplicaConfig(("a.*",), (5,), True)
    with pytest.raises(BadRecord, match=r"config\.mounter: rows are decoded") as e:
        ReplicaConfig.from_dict({"mounter": {"worker-num": 16}, "colour": 1}, strict=True)
    assert "unknown changefeed config key 'config.colour'" in str(e.value)
    with pytest.raises(BadRecord, match=r"config\.filter\.event-filters\[0\]\.matcher"):
        ReplicaConfig.from_dict({"filter": {"event-filters": [{"ignore-event": []}]}}, strict=True)
    with pytest.raises(BadRecord, match="must be an object"):
        ReplicaConfig.from_dict(["x"], strict=True)
    with pytest.raises(BadRecord, match="memory-quota must be a positive integer"):
        ReplicaConfig.from_dict({"memory-quota": "1G"}, strict=True)
    # A record TiCDC wrote into etcd keeps loading: its extra keys are TiCDC's own.
    assert ReplicaConfig.from_dict({"memory-quota": 1, "sink": {}}) == ReplicaConfig(memory_quota=1)


def test_event_filters_and_synced_status_round_trip() -> None:
    from tributary.cdc.model import EventFilterRule, ReplicaConfig

    raw = {
        "memory_quota": 4096,  # the v2 API's underscored spelling
        "filter": {
            "rules": ["shop.*"],
            "event_filters": [
                {
                    "matcher": ["shop.orders"],
                    "ignore_event": ["delete"],
                    "ignore_sql": ["^drop"],
                    "ignore_insert_value_expr": "price > 10",
                }
            ],
        },
        "synced-status": {"synced-check-interval": 60, "checkpoint-interval": 5},
    }
    config = ReplicaConfig.from_dict(raw, strict=True)
    assert config.event_filters == (
        EventFilterRule(("shop.orders",), ("delete",), ("^drop",), "price > 10"),
    )
    assert (config.memory_quota, config.synced_check_interval, config.checkpoint_interval) == (
        4096,
        60,
        5,
    )
    assert ReplicaConfig.from_dict(config.to_dict(), strict=True) == config
