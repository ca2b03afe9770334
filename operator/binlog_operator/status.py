"""A BinlogCluster's status from what the registry says (pure; no I/O).

Invariants: a condition's ``lastTransitionTime`` moves only when its status flips (Kubernetes
convention), and ``Ready`` is True only when exactly the pumps the StatefulSet runs are online
and every drainer in the spec has an online record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from tributary.registry.status import NodeState, NodeStatus

Condition = dict[str, Any]


def set_condition(
    conditions: Iterable[Mapping[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
) -> list[Condition]:
    """``conditions`` with ``type_`` set; other types kept as they are, in order."""
    value = "True" if status else "False"
    out: list[Condition] = []
    found = False
    for c in conditions:
        if c.get("type") != type_:
            out.append(dict(c))
            continue
        found = True
        since = c.get("lastTransitionTime") if c.get("status") == value else None
        out.append(_condition(type_, value, reason, message, since or _stamp(now)))
    if not found:
        out.append(_condition(type_, value, reason, message, _stamp(now)))
    return out


def _condition(type_: str, status: str, reason: str, message: str, since: str) -> Condition:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_entries(nodes: Iterable[NodeStatus]) -> list[dict[str, Any]]:
    return [
        {
            "nodeId": n.node_id,
            "addr": n.addr,
            "state": n.state.value,
            "maxCommitTS": n.max_commit_ts,
            "updateTS": n.update_ts,
        }
        for n in nodes
    ]


def online(nodes: Iterable[NodeStatus], among: Sequence[str] | None = None) -> int:
    """How many of ``nodes`` are online (only those whose node id is in ``among``, if given)."""
    return sum(
        1 for n in nodes if n.state is NodeState.ONLINE and (among is None or n.node_id in among)
    )


def readiness(
    pump_pods: Sequence[str],
    pumps: Sequence[NodeStatus],
    drainer_prefixes: Sequence[str],
    drainers: Sequence[NodeStatus],
) -> tuple[bool, str]:
    """(ready, why): every pump pod online; each drainer StatefulSet's pod online."""
    online = {p.node_id for p in pumps if p.state is NodeState.ONLINE}
    missing = [p for p in pump_pods if p not in online]
    online_drainers = [d.node_id for d in drainers if d.state is NodeState.ONLINE]
    absent = [
        prefix
        for prefix in drainer_prefixes
        if not any(d.startswith(f"{prefix}-") for d in online_drainers)
    ]
    if missing or absent:
        parts = []
        if missing:
            parts.append("pumps not online: " + ", ".join(missing))
        if absent:
            parts.append("drainers not online: " + ", ".join(absent))
        return False, "; ".join(parts)
    return True, f"{len(pump_pods)} pumps and {len(drainer_prefixes)} drainers online"
