"""Status conditions and readiness from registry records."""

from __future__ import annotations

from datetime import UTC, datetime

from binlog_operator.status import node_entries, readiness, set_condition
from tributary.registry.status import NodeState, NodeStatus

T0 = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
T1 = datetime(2024, 1, 1, 12, 5, 0, tzinfo=UTC)


def test_a_new_condition_is_appended_with_the_time_it_was_set() -> None:
    (c,) = set_condition([], "Ready", True, "AllOnline", "ok", T0)
    assert c == {
        "type": "Ready",
        "status": "True",
        "reason": "AllOnline",
        "message": "ok",
        "lastTransitionTime": "2024-01-01T12:00:00Z",
    }


def test_the_transition_time_moves_only_when_the_status_flips() -> None:
    first = set_condition([{"type": "Degraded", "status": "False"}], "Ready", False, "A", "a", T0)
    same = set_condition(first, "Ready", False, "B", "b", T1)
    assert same[1]["lastTransitionTime"] == "2024-01-01T12:00:00Z" and same[1]["reason"] == "B"
    flipped = set_condition(same, "Ready", True, "C", "c", T1)
    assert flipped[1]["lastTransitionTime"] == "2024-01-01T12:05:00Z"
    assert flipped[0] == {"type": "Degraded", "status": "False"}  # others untouched, in order


def pump(node: str, state: NodeState) -> NodeStatus:
    return NodeStatus(node, f"{node}:8250", state, max_commit_ts=7)


def test_ready_needs_every_pump_pod_and_every_drainer_online() -> None:
    pods = ["c-pump-0", "c-pump-1"]
    pumps = [
        pump("c-pump-0", NodeState.ONLINE),
        pump("c-pump-1", NodeState.ONLINE),
        pump("c-pump-2", NodeState.OFFLINE),
    ]
    drainers = [pump("c-drainer-d-0", NodeState.ONLINE)]
    assert readiness(pods, pumps, ["c-drainer-d"], drainers)[0]
    ok, why = readiness([*pods, "c-pump-2"], pumps, ["c-drainer-d", "c-drainer-e"], drainers)
    assert not ok and why == "pumps not online: c-pump-2; drainers not online: c-drainer-e"


def test_node_entries_carry_state_and_max_commit_ts() -> None:
    (e,) = node_entries([pump("c-pump-0", NodeState.CLOSING)])
    assert e["nodeId"] == "c-pump-0" and e["state"] == "closing" and e["maxCommitTS"] == 7
