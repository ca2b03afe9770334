"""The capture cluster's records, as JSON with TiCDC's field names (reference ticdc.md §1.2-1.5).

``CaptureInfo`` (lease-bound registration), ``ChangeFeedInfo`` (a changefeed's configuration and
state), ``ChangeFeedStatus`` (its progress: ``checkpoint-ts`` plus our ``source-position``, the
upstream binlog position token to resume after the checkpoint) and ``TaskPosition`` (the key
that places a changefeed on a capture; the processor reports errors through it).

Invariant: ``X.from_json(x.to_json()) == x`` for every record, and ``from_json`` ignores keys it
does not know (a newer writer's fields), so records written by one version are read by another.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from tributary.cdc.errors import BadRecord
from tributary.cdc.replica import EventFilterRule, ReplicaConfig

__all__ = ["EventFilterRule", "ReplicaConfig"]  # re-exported: the config lives in cdc.replica

VERSION = "v8.1.0-tributary"


class FeedState(enum.StrEnum):
    NORMAL = "normal"
    STOPPED = "stopped"
    FAILED = "failed"
    WARNING = "warning"
    FINISHED = "finished"
    REMOVED = "removed"

    @property
    def runs(self) -> bool:
        """Whether a processor should be running for a changefeed in this state."""
        return self in (FeedState.NORMAL, FeedState.WARNING)


class AdminJob(enum.IntEnum):
    NONE = 0
    STOP = 1
    RESUME = 2
    REMOVE = 3
    FINISH = 4


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _load(raw: bytes | str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise BadRecord(f"{what} is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise BadRecord(f"{what} is not a JSON object")
    return data


def _dump(data: Mapping[str, object]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class RunningError:
    """An error a processor reported: ``{"time","addr","code","message"}``."""

    message: str
    code: str = "CDC:ErrProcessorUnknown"
    addr: str = ""
    time: str = ""
    retriable: bool = True  # ours: whether the processor keeps retrying

    def to_dict(self) -> dict[str, object]:
        return {
            "time": self.time,
            "addr": self.addr,
            "code": self.code,
            "message": self.message,
            "retriable": self.retriable,
        }

    @classmethod
    def from_dict(cls, data: object) -> RunningError | None:
        if not isinstance(data, dict):
            return None
        return cls(
            message=str(data.get("message", "")),
            code=str(data.get("code", "")),
            addr=str(data.get("addr", "")),
            time=str(data.get("time", "")),
            retriable=bool(data.get("retriable", True)),
        )


@dataclass(frozen=True, slots=True)
class CaptureInfo:
    id: str
    address: str
    version: str = VERSION
    git_hash: str = ""
    deploy_path: str = ""
    start_timestamp: int = 0

    def to_json(self) -> bytes:
        return _dump(
            {
                "id": self.id,
                "address": self.address,
                "version": self.version,
                "git-hash": self.git_hash,
                "deploy-path": self.deploy_path,
                "start-timestamp": self.start_timestamp,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> CaptureInfo:
        d = _load(raw, "capture info")
        return cls(
            id=str(d.get("id", "")),
            address=str(d.get("address", "")),
            version=str(d.get("version", "")),
            git_hash=str(d.get("git-hash", "")),
            deploy_path=str(d.get("deploy-path", "")),
            start_timestamp=int(d.get("start-timestamp", 0)),
        )


@dataclass(frozen=True, slots=True)
class ChangeFeedInfo:
    namespace: str
    changefeed_id: str
    sink_uri: str
    start_ts: int
    target_ts: int = 0
    state: FeedState = FeedState.NORMAL
    admin_job_type: AdminJob = AdminJob.NONE
    create_time: str = ""
    config: ReplicaConfig = field(default_factory=ReplicaConfig)
    error: RunningError | None = None
    warning: RunningError | None = None
    upstream_id: int = 0
    creator_version: str = VERSION
    epoch: int = 0  # changes on every (re)start of the changefeed

    def with_state(self, state: FeedState, **changes: Any) -> ChangeFeedInfo:
        return replace(self, state=state, **changes)

    def to_json(self) -> bytes:
        return _dump(
            {
                "upstream-id": self.upstream_id,
                "namespace": self.namespace,
                "changefeed-id": self.changefeed_id,
                "sink-uri": self.sink_uri,
                "create-time": self.create_time,
                "start-ts": self.start_ts,
                "target-ts": self.target_ts,
                "admin-job-type": int(self.admin_job_type),
                "sort-engine": "unified",
                "sort-dir": "",
                "config": self.config.to_dict(),
                "state": self.state.value,
                "error": self.error.to_dict() if self.error else None,
                "warning": self.warning.to_dict() if self.warning else None,
                "creator-version": self.creator_version,
                "epoch": self.epoch,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> ChangeFeedInfo:
        d = _load(raw, "changefeed info")
        try:
            return cls(
                namespace=str(d.get("namespace", "default")),
                changefeed_id=str(d.get("changefeed-id", d.get("id", ""))),
                sink_uri=str(d.get("sink-uri", "")),
                start_ts=int(d.get("start-ts", 0)),
                target_ts=int(d.get("target-ts", 0)),
                state=FeedState(d.get("state") or "normal"),
                admin_job_type=AdminJob(int(d.get("admin-job-type", 0))),
                create_time=str(d.get("create-time", "")),
                config=ReplicaConfig.from_dict(d.get("config")),
                error=RunningError.from_dict(d.get("error")),
                warning=RunningError.from_dict(d.get("warning")),
                upstream_id=int(d.get("upstream-id", 0)),
                creator_version=str(d.get("creator-version", "")),
                epoch=int(d.get("epoch", 0)),
            )
        except (TypeError, ValueError) as e:
            raise BadRecord(f"changefeed info has a bad field: {e}") from e


@dataclass(frozen=True, slots=True)
class ChangeFeedStatus:
    checkpoint_ts: int
    source_position: str = ""  # ours: the upstream position token right after the checkpoint
    min_table_barrier_ts: int = 0
    admin_job_type: AdminJob = AdminJob.NONE

    def to_json(self) -> bytes:
        return _dump(
            {
                "checkpoint-ts": self.checkpoint_ts,
                "min-table-barrier-ts": self.min_table_barrier_ts or self.checkpoint_ts,
                "admin-job-type": int(self.admin_job_type),
                "source-position": self.source_position,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> ChangeFeedStatus:
        d = _load(raw, "changefeed status")
        try:
            return cls(
                checkpoint_ts=int(d.get("checkpoint-ts", 0)),
                source_position=str(d.get("source-position", "")),
                min_table_barrier_ts=int(d.get("min-table-barrier-ts", 0)),
                admin_job_type=AdminJob(int(d.get("admin-job-type", 0))),
            )
        except (TypeError, ValueError) as e:
            raise BadRecord(f"changefeed status has a bad field: {e}") from e


@dataclass(frozen=True, slots=True)
class TaskPosition:
    """``{"checkpoint-ts","resolved-ts","count","error","warning"}`` (legacy in TiCDC; here the
    processor's progress: its checkpoint, the highest ts it read, the rows it applied) and ours,
    ``last-synced-ts``: the commit ts of the last transaction that changed the sink."""

    checkpoint_ts: int = 0
    resolved_ts: int = 0
    count: int = 0
    error: RunningError | None = None
    warning: RunningError | None = None
    last_synced_ts: int = 0

    def to_json(self) -> bytes:
        return _dump(
            {
                "checkpoint-ts": self.checkpoint_ts,
                "resolved-ts": self.resolved_ts,
                "count": self.count,
                "error": self.error.to_dict() if self.error else None,
                "warning": self.warning.to_dict() if self.warning else None,
                "last-synced-ts": self.last_synced_ts,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> TaskPosition:
        d = _load(raw, "task position")
        return cls(
            checkpoint_ts=int(d.get("checkpoint-ts", 0)),
            resolved_ts=int(d.get("resolved-ts", 0)),
            count=int(d.get("count", 0)),
            error=RunningError.from_dict(d.get("error")),
            warning=RunningError.from_dict(d.get("warning")),
            last_synced_ts=int(d.get("last-synced-ts", 0)),
        )
