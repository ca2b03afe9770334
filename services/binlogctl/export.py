"""``export-drainer-state``: a drainer's checkpoint and the schema history up to it, as one file.

Where the checkpoint is read, first found wins:

1. ``--sink-url``: the downstream's own checkpoint row for this cluster (SQL sinks keep it in
   ``tidb_binlog.checkpoint``). Pointed at a downstream restored from a consistent dump
   (``mariadb-dump --single-transaction``, the checkpoint table included), it is exactly the
   point that dump was taken at, while the drainer kept running;
2. ``<--data-dir>/savepoint``: the file checkpoint of a drainer with a non-SQL sink (its data
   directory, or a copy of it);
3. ``--node-id`` alone: the checkpoint the drainer recorded in etcd, only once it is ``paused``
   or ``offline`` (a running drainer's moves on while the export is made).

The schema is the DDL history's jobs that finished at or before the checkpoint (etcd's history,
or TiDB's with ``--ddl-history``). Invariant: nothing is written to etcd or the history (the
downstream is opened as the drainer opens it, which creates its checkpoint tables where they are
missing); the file is replaced atomically, so a reader never sees half an export.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

from services.binlogctl.config import CtlConfig
from services.binlogctl.errors import CtlError
from services.binlogctl.results import StateExported
from tributary.coord.kv import Kv
from tributary.ddlhistory import DdlHistory, DdlHistoryError, KvDdlHistory, TidbHttpDdlHistory
from tributary.drainerstate import DrainerStateFile, dumps, jobs_at, now_text
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.schemes import open_sink
from tributary.sinks.urls import redact
from tributary.tso.cluster import discover

SAVEPOINT = "savepoint"


async def export_state(cfg: CtlConfig, kv: Kv) -> StateExported:
    clock = await discover(kv, cfg.pd_urls)
    cluster_id = clock.cluster_id
    if cluster_id is None:
        raise CtlError(
            f"etcd at {', '.join(cfg.pd_urls)} holds no cluster ID: no drainer of it to export"
        )
    node_id, commit_ts, source, consistent = await _checkpoint(cfg, kv, cluster_id)
    async with _history(cfg.ddl_history, kv) as history:
        try:
            every = await history.jobs_since(0)
        except DdlHistoryError as e:
            raise CtlError(f"cannot read the DDL history: {e}", retriable=e.retriable) from e
    state = DrainerStateFile(
        cluster_id=cluster_id,
        commit_ts=commit_ts,
        source=source,
        consistent=consistent,
        node_id=node_id,
        sink=redact(cfg.sink_url) if cfg.sink_url else "",
        jobs=jobs_at(every, commit_ts),
        exported_at=now_text(),
    )
    text = dumps(state)
    if not cfg.output:
        return StateExported(None, state, text)
    try:
        path = await asyncio.to_thread(_write, Path(cfg.output), text)
    except OSError as e:
        raise CtlError(f"cannot write {cfg.output}: {e}") from e
    return StateExported(path, state, text)


async def _checkpoint(cfg: CtlConfig, kv: Kv, cluster_id: int) -> tuple[str, int, str, bool]:
    """(node id, checkpoint, its source, consistent)."""
    node_id = cfg.node_id
    status = None
    if node_id:
        status = await NodeRegistry(kv).get(NodeKind.DRAINER, node_id)
        if status is None:
            raise CtlError(f"no drainer {node_id!r} is registered in etcd")
    if cfg.sink_url:
        ts = await _downstream_checkpoint(cfg.sink_url, cluster_id)
        return node_id, ts, "downstream", True
    savepoint = Path(cfg.data_dir) / SAVEPOINT
    if savepoint.exists():
        ts, consistent = _read_savepoint(savepoint)
        return node_id, ts, "savepoint", consistent
    if status is None:
        raise CtlError(
            f"no checkpoint to export: give --sink-url (the downstream), --data-dir (a directory "
            f"holding the drainer's savepoint; {savepoint} does not exist) or --node-id"
        )
    if status.state not in (NodeState.PAUSED, NodeState.OFFLINE):
        raise CtlError(
            f"drainer {node_id} is {status.state.value}: its checkpoint in etcd moves on while "
            f"it runs; pause it first (pause-drainer), or read the checkpoint from a consistent "
            f"copy of its downstream (--sink-url)"
        )
    if status.max_commit_ts <= 0:
        raise CtlError(f"drainer {node_id} has recorded no checkpoint yet")
    return node_id, status.max_commit_ts, "registry", True


async def _downstream_checkpoint(url: str, cluster_id: int) -> int:
    try:
        async with open_sink(url, SinkOptions(cluster_id)) as sink:
            ts = await sink.checkpoint()
    except SinkError as e:
        raise CtlError(
            f"cannot read the checkpoint of {redact(url)}: {e}", retriable=e.retriable
        ) from e
    if ts is None:
        raise CtlError(
            f"{redact(url)} holds no checkpoint of cluster {cluster_id} (the cluster of etcd at "
            f"--pd-urls): was its dump taken with the checkpoint table, from this cluster's "
            f"drainer?"
        )
    return ts


def _read_savepoint(path: Path) -> tuple[int, bool]:
    """(commitTS, consistent); lines that are not TOML (tidb-binlog's time lines) are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CtlError(f"cannot read the savepoint {path}: {e}") from e
    doc: dict[str, object] = {}
    for line in text.splitlines():
        with contextlib.suppress(tomllib.TOMLDecodeError):
            doc.update(tomllib.loads(line))
    ts = doc.get("commitTS")
    if not isinstance(ts, int) or isinstance(ts, bool) or ts <= 0:
        raise CtlError(f"{path}: no valid commitTS")
    return ts, bool(doc.get("consistent", False))


@contextlib.asynccontextmanager
async def _history(source: str, kv: Kv) -> AsyncIterator[DdlHistory]:
    if not source:
        yield KvDdlHistory(kv)
        return
    async with TidbHttpDdlHistory.connect(source) as history:
        yield history


def _write(path: Path, text: str) -> Path:
    directory = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
