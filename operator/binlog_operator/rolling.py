"""Driving a cluster's rolling update: read its StatefulSets, their pods and (while a roll is
held or under way) the registry, lower the partitions ``rollout.plan`` names, and say how far it
got.

Invariants: a partition is lowered only by a merge patch carrying the resourceVersion the
decision was read at, so a StatefulSet applied in between (a new template, held again) is never
stepped on stale facts; when the registry cannot be read nothing is lowered (a pump's health
cannot be known). The caller holds the cluster's lock, which ``reconcile`` and the Drainer
handler take around their applies too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from binlog_operator.kube import KubeClient, KubeError
from binlog_operator.manifests import labels
from binlog_operator.reconcile import OpenKv
from binlog_operator.rollout import NodeView, Plan, SetView, plan
from binlog_operator.rollviews import component_of, set_view, versions
from binlog_operator.spec import ClusterSpec
from tributary.coord.kv import KvError
from tributary.registry.registry import NodeRegistry, RegistryError
from tributary.registry.status import NodeKind, NodeStatus, StatusError
from tributary.wire.ts import physical_ms

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RollReport:
    plan: Plan
    versions: dict[str, str | None]  # component -> the versions its pods run
    stepped: tuple[str, ...] = ()  # the pods just released to be replaced


def selector(cluster: str) -> str:
    """Every StatefulSet (and pod) the operator runs for ``cluster``."""
    lbl = labels(cluster, "")
    keys = ("app.kubernetes.io/instance", "app.kubernetes.io/managed-by")
    return ",".join(f"{k}={lbl[k]}" for k in keys)


class Rollout:
    def __init__(
        self, kube: KubeClient, open_kv: OpenKv, *, etcd_timeout: float, max_lag: float
    ) -> None:
        self._kube = kube
        self._open_kv = open_kv
        self._etcd_timeout = etcd_timeout
        self._max_lag = max_lag

    async def advance(
        self, cluster: str, namespace: str, spec: ClusterSpec, *, watching: bool
    ) -> RollReport:
        """One step: lower what may be lowered now. ``watching``: read the registry even if
        nothing is held (the last roll was reported under way: its last pods are checked)."""
        sets, bodies = await self._sets(cluster, namespace)
        nodes: Mapping[str, NodeView] | None = None
        unreadable = ""
        if watching or any(s.rolling() for s in sets):
            try:
                nodes = await self._nodes(spec)
            except (KvError, RegistryError, StatusError, OSError, TimeoutError) as e:
                nodes, unreadable = {}, f"the registry ({e!r})"[:300]
        decided = plan(sets, nodes, self._max_lag)
        if unreadable:
            decided = replace(decided, partitions={}, waiting=unreadable)
        stepped: list[str] = []
        for name, partition in decided.partitions.items():
            sts = bodies[name]
            rolling = {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}
            version = str(sts["metadata"]["resourceVersion"])
            try:
                await self._kube.patch(
                    "apps/v1",
                    "StatefulSet",
                    namespace,
                    name,
                    version,
                    {"spec": {"updateStrategy": rolling}},
                )
            except KubeError as e:
                if not e.conflict:
                    raise
                log.info("%s/%s: moved on while deciding; next time", namespace, name)
                continue
            log.info("%s/%s: partition %d", namespace, name, partition)
            if partition < int(sts["spec"].get("replicas", 1)):
                stepped.append(f"{name}-{partition}")
        return RollReport(decided, versions(sets), tuple(stepped))

    async def _sets(
        self, cluster: str, namespace: str
    ) -> tuple[list[SetView], dict[str, dict[str, Any]]]:
        found = await self._kube.list_labelled(
            "apps/v1", "StatefulSet", namespace, selector(cluster)
        )
        bodies = {str(s["metadata"]["name"]): s for s in found if component_of(s)}
        pods = await self._kube.list_labelled("v1", "Pod", namespace, selector(cluster))
        by_set: dict[str, list[dict[str, Any]]] = {name: [] for name in bodies}
        for pod in pods:
            owner = _controller(pod)
            if owner in by_set:
                by_set[owner].append(pod)
        return [set_view(bodies[n], by_set[n]) for n in sorted(bodies)], bodies

    async def _nodes(self, spec: ClusterSpec) -> dict[str, NodeView]:
        async with asyncio.timeout(self._etcd_timeout), self._open_kv(spec.etcd_endpoints) as kv:
            registry = NodeRegistry(kv)
            records = await registry.list(NodeKind.PUMP) + await registry.list(NodeKind.DRAINER)
        return {r.node_id: node_view(r) for r in records}


def node_view(record: NodeStatus) -> NodeView:
    """A record's state and lag: its update ts minus its max commit ts (checkpoint), seconds."""
    ts, now = record.max_commit_ts, record.update_ts
    lag = max(0, physical_ms(now) - physical_ms(ts)) / 1000 if ts and now else None
    return NodeView(record.state.value, lag)


def _controller(obj: Mapping[str, Any]) -> str | None:
    refs: Sequence[Mapping[str, Any]] = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((str(r["name"]) for r in refs if r.get("controller")), None)
