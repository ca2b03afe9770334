"""Changefeeds as the v2 API shows them (``ChangefeedCommonInfo`` and the detail object).

The etcd records use dashed keys (``checkpoint-ts``); the API uses TiCDC's v2 field names with
underscores (``checkpoint_tso``, ``checkpoint_time``) and adds ours: ``source_position``. A sink
URI's password is masked as TiCDC masks it (``mysql://u:xxxxx@h:3306/``); etcd keeps the real
URI, since the captures open the changefeed's sink from it.

``Progress`` gathers a changefeed's figures from etcd (the status's checkpoint, the task
positions' resolved ts, rows and last synced ts) for ``/status``, ``/synced`` and the owner's
metrics; ``synced`` is TiCDC's ``/synced`` decision on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from services.capture.state import ClusterState, FeedView
from tributary.cdc.model import (
    ChangeFeedInfo,
    ChangeFeedStatus,
    ReplicaConfig,
    RunningError,
    TaskPosition,
)
from tributary.sinks.urls import redact
from tributary.wire.ts import physical_ms

TICDC_MASK = "xxxxx"  # TiCDC's MaskSinkURI: a sink URI's password as the API shows it


def ts_time(ts: int) -> str:
    """A TSO timestamp's physical part as TiCDC prints it: ``2024-05-01 12:00:00.000``."""
    if ts <= 0:
        return ""
    return ms_time(physical_ms(ts))


def ms_time(ms: int) -> str:
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"


def _error(e: RunningError | None) -> dict[str, object] | None:
    if e is None:
        return None
    return {"time": e.time, "addr": e.addr, "code": e.code, "message": e.message}


def _underscored(d: Mapping[str, object]) -> dict[str, object]:
    return {k.replace("-", "_"): v for k, v in d.items()}


def api_config(c: ReplicaConfig) -> dict[str, object]:
    """The config with the v2 API's underscored keys (TiCDC's ``ReplicaConfig`` JSON)."""
    return {
        "memory_quota": c.memory_quota,
        "case_sensitive": c.case_sensitive,
        "enable_sync_point": c.enable_sync_point,
        "sync_point_interval": c.sync_point_interval,  # nanoseconds, as TiCDC's
        "sync_point_retention": c.sync_point_retention,
        "filter": {
            "rules": list(c.filter_rules),
            "ignore_txn_start_ts": list(c.ignore_txn_start_ts),
            "event_filters": [_underscored(r.to_dict()) for r in c.event_filters],
        },
        "synced_status": {
            "synced_check_interval": c.synced_check_interval,
            "checkpoint_interval": c.checkpoint_interval,
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
    info: ChangeFeedInfo,
    status: ChangeFeedStatus | None,
    captures: Sequence[str],
    resolved_ts: int = 0,
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
        "resolved_ts": max(resolved_ts, checkpoint),
        "source_position": status.source_position if status else "",
        "task_status": [{"capture_id": c} for c in captures],
    }


@dataclass(frozen=True, slots=True)
class Progress:
    checkpoint_ts: int
    resolved_ts: int  # the slowest processor's highest ts read; never below the checkpoint
    last_synced_ts: int  # the last transaction that changed the sink (0: none since placed)
    count: int  # rows the processors applied since they started


def progress(status: ChangeFeedStatus | None, tasks: Mapping[str, TaskPosition]) -> Progress:
    checkpoint = status.checkpoint_ts if status else 0
    read = [t.resolved_ts for t in tasks.values() if t.resolved_ts]
    return Progress(
        checkpoint,
        max(checkpoint, min(read)) if read else checkpoint,
        max((t.last_synced_ts for t in tasks.values()), default=0),
        sum(t.count for t in tasks.values()),
    )


def feed_status(info: ChangeFeedInfo, p: Progress) -> dict[str, object]:
    """TiCDC's ``ChangefeedStatus`` (``GET /api/v2/changefeeds/{id}/status``), plus ``count``."""
    return {
        "state": info.state.value,
        "resolved_ts": p.resolved_ts,
        "checkpoint_ts": p.checkpoint_ts,
        "last_error": _error(info.error),
        "last_warning": _error(info.warning),
        "count": p.count,
    }


SYNCED = "Data syncing is finished"
NOT_SYNCED = "The data syncing is not finished, please wait"
STALLED = (
    "Nothing was written for the synced-check-interval but the checkpoint is old while the "
    "resolved ts is close to it: check that the upstream is reachable and its binlog readable "
    "(an unreachable upstream stops both); if it is down, the data that reached it is synced"
)


def synced(
    p: Progress, now_ms: int, synced_check_interval: int, checkpoint_interval: int
) -> dict[str, object]:
    """TiCDC's ``SyncedStatus``: synced when nothing has been written downstream for
    ``synced_check_interval`` seconds and the checkpoint is within ``checkpoint_interval``
    seconds of now. Times are the ts's physical parts, as TiCDC prints them."""
    quiet = now_ms - physical_ms(p.last_synced_ts) > synced_check_interval * 1000
    fresh = now_ms - physical_ms(p.checkpoint_ts) < checkpoint_interval * 1000
    if quiet and fresh:
        done, info = True, SYNCED
    elif quiet:
        gap = physical_ms(p.resolved_ts) - physical_ms(p.checkpoint_ts)
        done, info = False, STALLED if gap < checkpoint_interval * 1000 else NOT_SYNCED
    else:
        done, info = False, NOT_SYNCED
    return {
        "synced": done,
        "sink_checkpoint_ts": ts_time(p.checkpoint_ts),
        "puller_resolved_ts": ts_time(p.resolved_ts),
        "last_synced_ts": ts_time(p.last_synced_ts),
        "now_ts": ms_time(now_ms),
        "info": info,
    }


def processor_detail(
    feed_id: str, namespace: str, capture: str, task: TaskPosition, tables: Sequence[str] = ()
) -> dict[str, object]:
    """TiCDC's ``ProcessorDetail`` with this processor's figures; ``table_ids`` names the
    spans it holds (``schema.table``, ``#ddl``, or ``*`` for a whole changefeed), where
    TiCDC gives table ids."""
    return {
        "namespace": namespace,
        "changefeed_id": feed_id,
        "capture_id": capture,
        "table_ids": list(tables),
        "checkpoint_ts": task.checkpoint_ts,
        "resolved_ts": task.resolved_ts,
        "count": task.count,
        "last_synced_ts": task.last_synced_ts,
        "error": _error(task.error),
    }


def view_spans(view: FeedView, capture: str) -> list[str]:
    """The spans of a changefeed assigned to ``capture``."""
    return sorted(s for s, a in view.assign.items() if a.capture == capture)


def held_spans(state: ClusterState, capture: str) -> dict[str, list[str]]:
    """The spans ``capture`` holds, by running changefeed (``namespace/id``)."""
    held = {
        str(feed): view_spans(view, capture)
        for feed, view in sorted(state.feeds.items(), key=lambda kv: str(kv[0]))
        if view.info is not None and view.info.state.runs
    }
    return {feed: spans for feed, spans in held.items() if spans}
