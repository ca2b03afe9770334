"""Changefeeds as the v2 API shows them (``ChangefeedCommonInfo`` and the detail object).

The etcd records use dashed keys (``checkpoint-ts``); the API uses TiCDC's v2 field names with
underscores (``checkpoint_tso``, ``checkpoint_time``) and adds ours: ``source_position``. A sink
URI's password is masked as TiCDC masks it (``mysql://u:xxxxx@h:3306/``); etcd keeps the real
URI, since the captures open the changefeed's sink from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus, ReplicaConfig, RunningError
from tributary.sinks.urls import redact
from tributary.wire.ts import physical_ms

TICDC_MASK = "xxxxx"  # TiCDC's MaskSinkURI: a sink URI's password as the API shows it


def ts_time(ts: int) -> str:
    """A TSO timestamp's physical part as TiCDC prints it: ``2024-05-01 12:00:00.000``."""
    if ts <= 0:
        return ""
    when = datetime.fromtimestamp(physical_ms(ts) / 1000, UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"


def _error(e: RunningError | None) -> dict[str, object] | None:
    if e is None:
        return None
    return {"time": e.time, "addr": e.addr, "code": e.code, "message": e.message}


def api_config(c: ReplicaConfig) -> dict[str, object]:
    return {
        "case_sensitive": c.case_sensitive,
        "filter": {
            "rules": list(c.filter_rules),
            "ignore_txn_start_ts": list(c.ignore_txn_start_ts),
        },
    }


def feed_summary(info: ChangeFeedInfo, status: ChangeFeedStatus | None) -> dict[str, object]:
    checkpoint = status.checkpoint_ts if status else 0
    return {
        "upstream_id": info.upstream_id,
        "namespace": info.namespace,
        "id": info.changefeed_id,
        "state": info.state.value,
        "checkpoint_tso": checkpoint,
        "checkpoint_time": ts_time(checkpoint),
        "error": _error(info.error),
    }


def feed_detail(
    info: ChangeFeedInfo, status: ChangeFeedStatus | None, captures: Sequence[str]
) -> dict[str, object]:
    checkpoint = status.checkpoint_ts if status else 0
    return {
        "upstream_id": info.upstream_id,
        "namespace": info.namespace,
        "id": info.changefeed_id,
        "sink_uri": redact(info.sink_uri, mask=TICDC_MASK),
        "create_time": info.create_time,
        "start_ts": info.start_ts,
        "target_ts": info.target_ts,
        "admin_job_type": int(info.admin_job_type),
        "config": api_config(info.config),
        "state": info.state.value,
        "error": _error(info.error),
        "warning": _error(info.warning),
        "creator_version": info.creator_version,
        "epoch": info.epoch,
        "checkpoint_tso": checkpoint,
        "checkpoint_time": ts_time(checkpoint),
        "resolved_ts": checkpoint,
        "source_position": status.source_position if status else "",
        "task_status": [{"capture_id": c} for c in captures],
    }
