"""What each binlogctl command returns: plain values, rendered by ``render``.

Invariant: results carry only data (no connections or callbacks), so rendering is a
pure function of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tributary.drainerstate import DrainerStateFile
from tributary.registry.status import NodeKind, NodeStatus


@dataclass(frozen=True)
class NodeList:
    """``pumps``/``drainers``: the records shown, and how many offline ones were hidden."""

    kind: NodeKind
    nodes: tuple[NodeStatus, ...]
    hidden_offline: int = 0


@dataclass(frozen=True)
class StateUpdated:
    """``update-*``: the record before and after its state was overwritten."""

    kind: NodeKind
    before: NodeStatus
    after: NodeStatus


@dataclass(frozen=True)
class ActionApplied:
    """``pause-*``/``offline-*``: the node accepted ``action`` at ``url``.

    ``accepted_state`` is the state the node answered with (pausing/closing);
    ``final`` the record once it reached paused/offline, None when not waited for.
    """

    kind: NodeKind
    node_id: str
    action: str
    url: str
    accepted_state: str
    final: NodeStatus | None


@dataclass(frozen=True)
class MetaWritten:
    """``generate_meta``: the savepoint file written and its content."""

    path: Path
    commit_ts: int
    text: str


@dataclass(frozen=True)
class Encrypted:
    """``encrypt``: the ciphertext of ``--text`` (a drainer's ``encrypted_password``)."""

    ciphertext: str


@dataclass(frozen=True)
class StateExported:
    """``export-drainer-state``: the export, written to ``path`` (None: for stdout)."""

    path: Path | None
    state: DrainerStateFile
    text: str


Result = NodeList | StateUpdated | ActionApplied | MetaWritten | Encrypted | StateExported
