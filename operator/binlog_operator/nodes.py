"""The Pump and Drainer resources of a BinlogCluster, and their status from the registry (pure).

Naming: a pump's resource, pod and node id are one name, ``<cluster>-pump-<ordinal>``; a
drainer's resource owned by a cluster is ``<cluster>-drainer-<name>`` (its StatefulSet's name;
its pod and node id add ``-0``), and a Drainer created on its own keeps the name it was given
and runs as ``<cluster>-drainer-<spec.name or its name>``. Invariants: a resource the cluster
owns carries the cluster's controller owner reference and the label ``binlog.io/cluster``; a
status always names the node id the resource stands for, and its lag is never negative.

Worked example: pump ``c-pump-1`` recorded ``online`` with max commit ts
``compose(1712905541123, 0)`` read at 1712905546123 ms gives ``{"nodeId": "c-pump-1", "state":
"online", "maxCommitTS": ..., "commitTime": "2024-04-12T07:05:41.123Z", "lagSeconds": 5}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from binlog_operator import DRAINER_KIND, KIND, PUMP_KIND
from binlog_operator.changefeeds import checkpoint_time
from binlog_operator.configs import drainer_name
from binlog_operator.kube import API_VERSION
from binlog_operator.manifests import labels, pump_pod
from tributary.registry.status import NodeStatus
from tributary.wire.ts import physical_ms

Obj = dict[str, Any]
CLUSTER_LABEL = "binlog.io/cluster"
UNREGISTERED = "unregistered"


@dataclass(frozen=True)
class Observed:
    """A cluster as one status pass read it: the pump StatefulSet's replicas, the registry
    records of its pumps and drainers, the capture cluster's changefeeds, its Pump and
    Drainer resources, and the cluster id in its etcd."""

    pump_replicas: int
    pumps: list[NodeStatus]
    drainers: list[NodeStatus]
    changefeeds: list[dict[str, Any]]
    pump_resources: list[Mapping[str, Any]] = field(default_factory=list)
    drainer_resources: list[Mapping[str, Any]] = field(default_factory=list)
    cluster_id: int | None = None  # the cluster id stored in its etcd (None: none yet)


def owner_ref(kind: str, name: str, uid: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _resource(kind: str, name: str, cluster: str, namespace: str, uid: str, spec: Obj) -> Obj:
    component = "pump" if kind == PUMP_KIND else "drainer"
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels(cluster, component), CLUSTER_LABEL: cluster},
            "ownerReferences": [owner_ref(KIND, cluster, uid)],
        },
        "spec": spec,
    }


def pump_resource(cluster: str, namespace: str, uid: str, ordinal: int) -> Obj:
    """The Pump of ordinal ``ordinal``, owned by the cluster (uid ``uid``)."""
    spec = {"cluster": cluster, "ordinal": ordinal}
    return _resource(PUMP_KIND, pump_pod(cluster, ordinal), cluster, namespace, uid, spec)


def drainer_resource(cluster: str, namespace: str, uid: str, entry: Mapping[str, Any]) -> Obj:
    """The Drainer of one ``spec.drainers[]`` entry (fields as given), owned by the cluster."""
    name = str(entry["name"])
    spec = {"cluster": cluster, **entry}
    return _resource(DRAINER_KIND, drainer_name(cluster, name), cluster, namespace, uid, spec)


def drainer_of(body: Mapping[str, Any]) -> tuple[str, str]:
    """(cluster, drainer name) of a Drainer resource."""
    spec = body.get("spec") or {}
    return str(spec.get("cluster", "")), str(spec.get("name") or body["metadata"]["name"])


def drainer_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Drainer's spec without ``cluster`` and ``name``: what ``spec.parse_drainer`` reads."""
    return {k: v for k, v in (body.get("spec") or {}).items() if k not in ("cluster", "name")}


def owned_by(body: Mapping[str, Any], uid: str) -> bool:
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("controller") for r in refs)


def of_cluster(bodies: Iterable[Mapping[str, Any]], cluster: str) -> list[Mapping[str, Any]]:
    """The resources whose ``spec.cluster`` is ``cluster``, by name."""
    found = [b for b in bodies if (b.get("spec") or {}).get("cluster") == cluster]
    return sorted(found, key=lambda b: str(b["metadata"]["name"]))


def node_status(
    node_id: str, record: NodeStatus | None, ts_field: str, now_ms: int
) -> dict[str, Any]:
    """A Pump's or Drainer's status fields from its registry record (``ts_field``:
    ``maxCommitTS`` or ``checkpointTS``); None values remove a field in a merge patch."""
    if record is None:
        return {
            "nodeId": node_id,
            "state": UNREGISTERED,
            "addr": None,
            ts_field: None,
            "commitTime": None,
            "lagSeconds": None,
            "updateTS": None,
        }
    ts = record.max_commit_ts
    lag = max(0, now_ms - physical_ms(ts)) // 1000 if ts else None
    return {
        "nodeId": node_id,
        "state": record.state.value,
        "addr": record.addr,
        ts_field: ts,
        "commitTime": checkpoint_time(ts) if ts else None,
        "lagSeconds": lag,
        "updateTS": record.update_ts,
    }


def changed(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether patching ``wanted`` into ``current`` (a status) would change it."""
    return any(current.get(k) != v for k, v in wanted.items())
