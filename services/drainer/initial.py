"""Starting a drainer from an exported state (``initial-state``; ``binlogctl`` exports it).

The first start with a given export checks it against what the drainer finds, then continues
after its checkpoint ``T``:

* the export's cluster ID must be the one in etcd (the pumps hold that cluster's binlogs);
* a checkpoint already in the downstream must be ``T`` (a downstream restored from a dump taken
  at ``T`` carries the checkpoint row of that moment); any other one means the downstream does
  not match the export, and the drainer refuses rather than leave a gap or repeat;
* a savepoint already in the data directory must be ``T`` too;
* the export's DDL jobs are put into the DDL history where missing, and must equal the ones
  there (``tributary.drainerstate.restore_jobs``).

Then the savepoint is set to ``T`` and ``<data-dir>/initial-state`` records which export was
taken (its cluster ID and ``T``). Later starts find that record and resume from their own
checkpoint as usual, so the ConfigMap holding the export may stay in place. Invariant: the
record is written only after the savepoint, so a crash in between repeats the checks, which
pass again.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from services.drainer.checkpoint import FileCheckpoint
from services.drainer.errors import CheckpointError, DrainerError
from tributary.ddlhistory import DdlHistory, DdlHistoryError
from tributary.drainerstate import DrainerStateFile, StateFileError, loads, restore_jobs

MARKER = "initial-state"


class InitialStateError(DrainerError):
    """The initial state does not fit this cluster, downstream or data directory."""


def read_state(path: Path) -> DrainerStateFile:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InitialStateError(f"initial-state: cannot read {path}: {e}") from e
    try:
        return loads(text, f"initial-state {path}")
    except StateFileError as e:
        raise InitialStateError(str(e)) from e


def taken(data_dir: Path, state: DrainerStateFile) -> bool:
    """Whether this data directory's drainer already started from ``state``."""
    try:
        return (data_dir / MARKER).read_text(encoding="utf-8").strip() == state.identity()
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"cannot read {data_dir / MARKER}: {e}") from e


def _record(data_dir: Path, state: DrainerStateFile) -> None:
    tmp = data_dir / f".{MARKER}.tmp"
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(state.identity() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, data_dir / MARKER)
    except OSError as e:
        raise CheckpointError(f"cannot write {data_dir / MARKER}: {e}", retriable=True) from e


async def start_from(
    path: Path,
    state: DrainerStateFile,
    *,
    cluster_id: int,
    history: DdlHistory,
    store: FileCheckpoint,
    saved: int | None,
    downstream: int | None,
) -> int:
    """Check ``state`` (read from ``path``), bring the history and savepoint to it; its
    checkpoint. ``saved`` and ``downstream`` are the checkpoints found in the data directory
    and in the downstream (None: none)."""
    where = f"initial-state {path}"
    ts = state.commit_ts
    if state.cluster_id != cluster_id:
        raise InitialStateError(
            f"{where} was exported from cluster {state.cluster_id}, but the pumps' etcd is "
            f"cluster {cluster_id}: export the state of a drainer of this cluster"
        )
    if downstream is not None and downstream != ts:
        raise InitialStateError(
            f"{where} continues after commit ts {ts}, but the downstream already holds the "
            f"checkpoint {downstream} of cluster {cluster_id}: restore the downstream from a "
            f"dump taken at {ts} (or export the state again from it), or remove initial-state "
            f"to resume from the downstream's checkpoint"
        )
    if saved is not None and saved != ts:
        raise InitialStateError(
            f"{where} continues after commit ts {ts}, but this data directory already holds the "
            f"checkpoint {saved}: start from an empty data directory, or remove initial-state"
        )
    try:
        await restore_jobs(history, state.jobs)
    except StateFileError as e:
        raise InitialStateError(f"{where}: {e}") from e
    except DdlHistoryError as e:
        raise DrainerError(f"{where}: DDL history: {e}", retriable=e.retriable) from e
    await store.save(ts, state.consistent)
    await asyncio.to_thread(_record, store.path.parent, state)
    return ts
