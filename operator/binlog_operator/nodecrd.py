"""The Pump and Drainer CustomResourceDefinitions (pure): one resource per pump or drainer node.

A BinlogCluster owns one ``Pump`` per pump replica (named after its pod, which is also the pump's
node id) and one ``Drainer`` per ``spec.drainers[]`` entry; a ``Drainer`` may also be created on
its own, naming its BinlogCluster in ``spec.cluster``. Invariant: every printer column's path is
a field of the schema (a unit test checks it), and the status the operator writes (node id,
registry state, max commit ts or checkpoint, lag, last error, conditions) fits the schema.
"""

from __future__ import annotations

from typing import Any

from binlog_operator import DRAINER_KIND, DRAINER_PLURAL, PUMP_KIND, PUMP_PLURAL
from binlog_operator.crdschema import CONDITION, DRAINER_ITEM, INT, STR, Schema, definition, obj

_CLUSTER = {**STR, "description": "the BinlogCluster (same namespace) this node belongs to"}


def _status(ts_field: str, ts_description: str) -> Schema:
    return obj(
        {
            "observedGeneration": INT,
            "nodeId": {**STR, "description": "the node id in the registry (= its pod name)"},
            "addr": STR,
            "state": {
                **STR,
                "description": "registry state: online, pausing, paused, closing, offline "
                "(unregistered: no record yet)",
            },
            ts_field: {**INT, "description": ts_description},
            "commitTime": {**STR, "description": f"RFC 3339 time of {ts_field}"},
            "lagSeconds": {
                "type": "integer",
                "description": "seconds between now and the physical time of " + ts_field,
            },
            "updateTS": INT,
            "lastError": {**STR, "description": "the last problem the operator saw with it"},
            "conditions": {"type": "array", "items": CONDITION},
        }
    )


PUMP_SPEC = obj(
    {
        "cluster": _CLUSTER,
        "ordinal": {"type": "integer", "minimum": 0, "description": "the pump pod's ordinal"},
    },
    ["cluster"],
)
PUMP_STATUS = _status("maxCommitTS", "the pump's max commit ts (TSO)")

DRAINER_SPEC = obj(
    {
        "cluster": _CLUSTER,
        **{
            k: v
            for k, v in DRAINER_ITEM["properties"].items()
            if k != "name"  # optional here: defaults to the resource's name
        },
        "name": {
            **DRAINER_ITEM["properties"]["name"],
            "description": "the drainer's name: it runs as <cluster>-drainer-<name> "
            "(default: this resource's name)",
        },
    },
    ["cluster"],
)
DRAINER_STATUS = _status("checkpointTS", "the drainer's checkpoint: every binlog <= it applied")


def _columns(ts_name: str, ts_field: str) -> list[dict[str, Any]]:
    return [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.cluster"},
        {"name": "Node ID", "type": "string", "jsonPath": ".status.nodeId"},
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
        {"name": ts_name, "type": "integer", "jsonPath": f".status.{ts_field}"},
        {"name": "Lag", "type": "integer", "jsonPath": ".status.lagSeconds"},
        {"name": "Error", "type": "string", "jsonPath": ".status.lastError", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def pump_crd() -> dict[str, Any]:
    return definition(
        PUMP_KIND,
        PUMP_PLURAL,
        ["bp"],
        PUMP_SPEC,
        PUMP_STATUS,
        {"status": {}},
        _columns("Max Commit TS", "maxCommitTS"),
    )


def drainer_crd() -> dict[str, Any]:
    return definition(
        DRAINER_KIND,
        DRAINER_PLURAL,
        ["bd"],
        DRAINER_SPEC,
        DRAINER_STATUS,
        {"status": {}},
        _columns("Checkpoint", "checkpointTS"),
    )
