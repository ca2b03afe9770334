"""Node status records and the node-state machine (pure; no I/O).

Invariant: a status serializes to exactly the JSON field names tidb-binlog's
``node.Status`` uses, and parsing accepts what a Go pump or drainer writes.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from typing import Any

from tributary.errors import TributaryError

ROOT = "/tidb-binlog/v1"


class NodeKind(enum.StrEnum):
    PUMP = "pumps"
    DRAINER = "drainers"


class NodeState(enum.StrEnum):
    ONLINE = "online"
    PAUSING = "pausing"
    PAUSED = "paused"
    CLOSING = "closing"
    OFFLINE = "offline"


class StatusError(TributaryError, ValueError):
    """A status record could not be parsed."""


def node_key(kind: NodeKind, node_id: str) -> bytes:
    return f"{ROOT}/{kind.value}/{node_id}".encode()


def kind_prefix(kind: NodeKind) -> bytes:
    return f"{ROOT}/{kind.value}/".encode()


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node's record. ``max_commit_ts`` is the pump's sorted max commit ts,
    or the drainer's checkpoint (it has consumed every binlog <= it)."""

    node_id: str
    addr: str
    state: NodeState
    is_alive: bool = True
    score: int = 0
    labels: dict[str, str] | None = field(default=None, compare=False)
    max_commit_ts: int = 0
    update_ts: int = 0
    stuck_prewrites: tuple[int, ...] = field(default=(), compare=False)
    """Pump only: start_ts of prewrites waiting past max-txn-timeout. Stored as
    ``stuckPrewrites`` only when not empty (tidb-binlog's readers ignore the extra key)."""

    def with_state(self, state: NodeState) -> NodeStatus:
        return replace(self, state=state)

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "nodeId": self.node_id,
            "host": self.addr,
            "state": self.state.value,
            "isAlive": self.is_alive,
            "score": self.score,
            "label": None if self.labels is None else {"labels": dict(self.labels)},
            "maxCommitTS": self.max_commit_ts,
            "updateTS": self.update_ts,
        }
        if self.stuck_prewrites:
            doc["stuckPrewrites"] = list(self.stuck_prewrites)
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> NodeStatus:
        try:
            doc = json.loads(raw)
            label = doc.get("label")
            labels = None if not label else dict(label.get("labels") or {})
            return cls(
                node_id=str(doc["nodeId"]),
                addr=str(doc.get("host", "")),
                state=NodeState(doc["state"]),
                is_alive=bool(doc.get("isAlive", False)),
                score=int(doc.get("score", 0)),
                labels=labels,
                max_commit_ts=int(doc.get("maxCommitTS", 0)),
                update_ts=int(doc.get("updateTS", 0)),
                stuck_prewrites=tuple(int(t) for t in doc.get("stuckPrewrites") or ()),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StatusError(f"bad node status record: {raw[:200]!r}: {e}") from e


# Transitions a running node makes by itself or on an operator's request.
# binlogctl update-pump/update-drainer may write any state (to repair records
# of dead processes); that path does not consult this table.
TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    NodeState.ONLINE: frozenset({NodeState.PAUSING, NodeState.CLOSING}),
    NodeState.PAUSING: frozenset({NodeState.PAUSED}),
    NodeState.PAUSED: frozenset({NodeState.ONLINE}),
    NodeState.CLOSING: frozenset({NodeState.OFFLINE}),
    NodeState.OFFLINE: frozenset({NodeState.ONLINE}),
}


def can_transition(current: NodeState, target: NodeState) -> bool:
    return target in TRANSITIONS[current]
