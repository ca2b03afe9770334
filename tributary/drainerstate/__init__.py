"""A drainer's exported state: its checkpoint and the schema history up to it, as one JSON file.

``binlogctl export-drainer-state`` writes it; a drainer started with ``initial-state`` (the
BinlogCluster's ``drainers[].initialState``) reads it and continues after its checkpoint. The
file::

    {
      "kind": "tributary-drainer-state",
      "version": 1,
      "cluster_id": 7312345678901234567,
      "checkpoint": {"commit_ts": 449812345678901249, "consistent": true,
                     "source": "downstream", "commit_time": "2024-05-16T22:18:45.105Z"},
      "drainer": {"node_id": "demo-drainer-down-0", "sink": "mysql://drainer@10.0.0.5:3306/"},
      "schema": {"version": 42, "jobs": [<DDL jobs in TiDB's job JSON, by schema version>]},
      "exported_at": "2024-05-16T12:30:02Z"
    }

``schema.jobs`` are the history's jobs that finished at or before the checkpoint (the schema the
drainer had applied there); ``schema.version`` the highest of their versions.

Invariants: ``loads`` either returns a ``DrainerStateFile`` whose every field has its type and
range, or raises ``StateFileError`` naming what is wrong (a newer ``version`` than this code
reads is refused, never half-read); ``dumps(loads(text))`` keeps every field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tributary.ddlhistory import (
    DdlHistory,
    DdlHistoryError,
    DdlJob,
    ReadOnlyHistory,
    job_from_json,
    job_to_json,
)
from tributary.errors import TributaryError
from tributary.wire.ts import physical_ms

KIND = "tributary-drainer-state"
VERSION = 1
SOURCES = ("downstream", "savepoint", "registry")  # where the checkpoint was read


class StateFileError(TributaryError):
    """The file is not a drainer state this code can use."""


@dataclass(frozen=True)
class DrainerStateFile:
    cluster_id: int
    commit_ts: int  # the checkpoint: every binlog with a commit ts <= it was applied
    source: str  # one of SOURCES
    consistent: bool = True
    node_id: str = ""  # the drainer it was exported from ("" when not named)
    sink: str = ""  # its downstream, password removed ("" when not read from it)
    jobs: tuple[DdlJob, ...] = ()  # the history's jobs finished at or before commit_ts
    exported_at: str = ""  # RFC 3339, UTC

    @property
    def schema_version(self) -> int:
        return max((j.schema_version for j in self.jobs), default=0)

    def identity(self) -> str:
        """What tells two exports apart for a drainer: its cluster and checkpoint."""
        return f"{self.cluster_id}:{self.commit_ts}"


def jobs_at(jobs: Iterable[DdlJob], commit_ts: int) -> tuple[DdlJob, ...]:
    """The jobs that finished at or before ``commit_ts``, by (schema version, id)."""
    kept = [j for j in jobs if j.finished_ts <= commit_ts]
    return tuple(sorted(kept, key=lambda j: (j.schema_version, j.id)))


def _time(ts: int) -> str:
    when = datetime.fromtimestamp(physical_ms(ts) / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def dumps(state: DrainerStateFile) -> str:
    doc = {
        "kind": KIND,
        "version": VERSION,
        "cluster_id": state.cluster_id,
        "checkpoint": {
            "commit_ts": state.commit_ts,
            "consistent": state.consistent,
            "source": state.source,
            "commit_time": _time(state.commit_ts),
        },
        "drainer": {"node_id": state.node_id, "sink": state.sink},
        "schema": {
            "version": state.schema_version,
            "jobs": [job_to_json(j) for j in state.jobs],
        },
        "exported_at": state.exported_at,
    }
    return json.dumps(doc, indent=2) + "\n"


def _field(doc: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StateFileError(f"{where}{key}: missing or not a {kind.__name__}")
    return value


def loads(text: str | bytes, origin: str = "drainer state") -> DrainerStateFile:
    """The state in ``text``; ``StateFileError`` (prefixed with ``origin``) when unusable."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise StateFileError(f"{origin}: not JSON: {e}") from e
    try:
        return _parse(doc)
    except StateFileError as e:
        raise StateFileError(f"{origin}: {e}") from e


def _parse(doc: object) -> DrainerStateFile:
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise StateFileError(f'not a drainer state (want "kind": "{KIND}")')
    version = _field(doc, "version", int, "")
    if version != VERSION:
        raise StateFileError(f"version {version} is not one this drainer reads ({VERSION})")
    cluster_id = _field(doc, "cluster_id", int, "")
    checkpoint = _field(doc, "checkpoint", dict, "")
    commit_ts = _field(checkpoint, "commit_ts", int, "checkpoint.")
    if cluster_id <= 0 or commit_ts <= 0:
        raise StateFileError("cluster_id and checkpoint.commit_ts must be positive")
    source = _field(checkpoint, "source", str, "checkpoint.")
    if source not in SOURCES:
        raise StateFileError(f"checkpoint.source: {source!r} is not one of {', '.join(SOURCES)}")
    drainer = doc.get("drainer") or {}
    schema = _field(doc, "schema", dict, "")
    raw_jobs = _field(schema, "jobs", list, "schema.")
    try:
        jobs = tuple(job_from_json(j) for j in raw_jobs)
    except DdlHistoryError as e:
        raise StateFileError(f"schema.jobs: {e}") from e
    late = [j.id for j in jobs if j.finished_ts > commit_ts]
    if late:
        raise StateFileError(f"schema.jobs: jobs {late} finished after the checkpoint")
    return DrainerStateFile(
        cluster_id=cluster_id,
        commit_ts=commit_ts,
        source=source,
        consistent=bool(checkpoint.get("consistent", False)),
        node_id=str(drainer.get("node_id", "")) if isinstance(drainer, dict) else "",
        sink=str(drainer.get("sink", "")) if isinstance(drainer, dict) else "",
        jobs=jobs,
        exported_at=str(doc.get("exported_at", "")),
    )


async def restore_jobs(history: DdlHistory, jobs: Iterable[DdlJob]) -> int:
    """Make ``history`` hold every job of an export: a missing one is stored, one already there
    must be the same job. The number stored; ``StateFileError`` when the history holds another
    job under an exported id (the export is of another cluster's history, or the history was
    rewritten) or lacks one and cannot store it (TiDB's own history); errors reading or
    writing the history pass through (``DdlHistoryError``, retriable when the store is down)."""
    stored = 0
    for job in jobs:
        found = await history.get_job(job.id)
        if found is None:
            try:
                await history.put_job(job)
            except ReadOnlyHistory as e:
                raise StateFileError(
                    f"DDL job {job.id} of the export is not in the DDL history, which is "
                    f"read-only: {e}"
                ) from e
            stored += 1
        elif found != job:
            raise StateFileError(
                f"DDL job {job.id} differs between the export (version {job.schema_version}, "
                f"{job.query!r}) and the DDL history (version {found.schema_version}, "
                f"{found.query!r}): the export is not of this history"
            )
    return stored
