"""Keeping a cluster's Pump and Drainer resources, and running the drainer each Drainer names.

The cluster reconcile applies one Pump per pump pod and one Drainer per ``spec.drainers[]``
entry (owned by the cluster); a Drainer may also exist on its own. ``run_drainer`` renders one
Drainer's ConfigMap, Service and StatefulSet (owned by that Drainer) from its spec and its
cluster's, the same way for both. Invariants: a Drainer's problem (bad spec, a name already run
by another Drainer, a missing cluster, a sink type change once it has a checkpoint) is returned
as a ``DrainerProblem`` for that Drainer alone, never raised for the cluster, and nothing of it
is applied; a drainer's objects are never applied over, or deleted from under, another
Drainer's (the StatefulSet's controller says whose they are); and its StatefulSet is applied with
the partition ``rollviews.with_rollout`` gives, so a changed template waits for the roll.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from binlog_operator import DRAINER_KIND, PUMP_KIND
from binlog_operator.configs import check_one_drainer, drainer_name
from binlog_operator.drainers import delete_drainer, drainer_pod
from binlog_operator.immutable import (
    CHANGE_REFUSED,
    running_sink_type,
    sink_change,
    sink_type,
    storage_change,
)
from binlog_operator.kube import API_VERSION, KubeClient, KubeError
from binlog_operator.manifests import drainer_objects, pump_pod
from binlog_operator.nodes import (
    Observed,
    changed,
    drainer_fields,
    drainer_of,
    drainer_resource,
    node_status,
    of_cluster,
    owned_by,
    owner_ref,
    pump_resource,
)
from binlog_operator.rollviews import with_rollout
from binlog_operator.spec import ClusterSpec, SpecError, parse_drainer
from binlog_operator.volumes import grow, plan, wait_gone

log = logging.getLogger(__name__)
Body = Mapping[str, Any]


@dataclass(frozen=True)
class DrainerProblem:
    """Why a Drainer is not running as its spec says: ``reason`` is the condition's reason;
    ``permanent`` when only an edit of the Drainer (or its cluster's entry) helps."""

    reason: str
    message: str
    permanent: bool = True


class NodeResources:
    def __init__(self, kube: KubeClient, spark_account: str) -> None:
        self._kube = kube
        self._spark_account = spark_account

    async def pumps_of(self, cluster: str, namespace: str) -> list[Body]:
        return of_cluster(await self._list(PUMP_KIND, namespace), cluster)

    async def drainers_of(self, cluster: str, namespace: str) -> list[Body]:
        return of_cluster(await self._list(DRAINER_KIND, namespace), cluster)

    async def _list(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return await self._kube.list_labelled(API_VERSION, kind, namespace, None)

    async def apply_pumps(
        self,
        cluster: str,
        namespace: str,
        uid: str,
        replicas: int,
        only_missing: Set[str] | None = None,
    ) -> None:
        """A Pump per ordinal below ``replicas`` (those named in ``only_missing``, if given)."""
        for i in range(replicas):
            if only_missing is not None and pump_pod(cluster, i) not in only_missing:
                continue
            await self._kube.apply(pump_resource(cluster, namespace, uid, i))

    async def delete_pumps(self, cluster: str, namespace: str, first: int, end: int) -> None:
        """Delete the Pumps of ordinals ``first`` .. ``end - 1`` (their pumps are offline)."""
        for i in range(first, end):
            await self._kube.delete(API_VERSION, PUMP_KIND, namespace, pump_pod(cluster, i))

    async def apply_drainers(
        self, cluster: str, namespace: str, uid: str, entries: Iterable[Mapping[str, Any]]
    ) -> None:
        for entry in entries:
            await self._kube.apply(drainer_resource(cluster, namespace, uid, entry))

    async def restore(
        self,
        cluster: str,
        namespace: str,
        uid: str,
        seen: Observed,
        entries: Iterable[Mapping[str, Any]],
    ) -> None:
        """Re-create the Pumps of running pods and the Drainers of spec entries that are
        missing (a Pump whose finalizer was removed by hand comes back)."""
        have = {b["metadata"]["name"] for b in seen.pump_resources}
        wanted = {pump_pod(cluster, i) for i in range(seen.pump_replicas)}
        if wanted - have:
            await self.apply_pumps(cluster, namespace, uid, seen.pump_replicas, wanted - have)
        drainers = {b["metadata"]["name"] for b in seen.drainer_resources}
        missing = [e for e in entries if drainer_name(cluster, str(e["name"])) not in drainers]
        await self.apply_drainers(cluster, namespace, uid, missing)

    async def delete_owned(self, cluster: str, namespace: str, uid: str) -> None:
        """Delete the Pumps and Drainers the cluster owns (it is being deleted and has closed
        them); best effort, as owner references remove them anyway."""
        try:
            bodies = [(PUMP_KIND, b) for b in await self.pumps_of(cluster, namespace)]
            bodies += [(DRAINER_KIND, b) for b in await self.drainers_of(cluster, namespace)]
            for kind, body in bodies:
                if owned_by(body, uid):
                    await self._kube.delete(API_VERSION, kind, namespace, body["metadata"]["name"])
        except KubeError as e:
            log.warning(
                "%s/%s: pump/drainer resources left to the garbage collector: %s",
                namespace,
                cluster,
                e,
            )

    async def delete_drainer_resource(self, namespace: str, name: str) -> None:
        await self._kube.delete(API_VERSION, DRAINER_KIND, namespace, name)

    async def run_drainer(
        self,
        cluster: str,
        namespace: str,
        cluster_uid: str,
        spec: ClusterSpec,
        in_spec: Set[str],
        body: Body,
    ) -> DrainerProblem | None:
        """Apply the objects of the drainer ``body`` (a Drainer of ``cluster``) describes."""
        _, name = drainer_of(body)
        md = body["metadata"]
        if not owned_by(body, cluster_uid) and name in in_spec:
            return DrainerProblem(
                "NameTaken",
                f"drainer {name!r} is in spec.drainers of BinlogCluster {cluster}: "
                "give this Drainer another name (spec.name)",
            )
        try:
            drainer = parse_drainer(drainer_fields(body), name, self._spark_account)
            check_one_drainer(spec, drainer, cluster, namespace)
        except SpecError as e:
            return DrainerProblem("InvalidSpec", str(e))
        sts = drainer_name(cluster, name)
        live = await self._kube.get("apps/v1", "StatefulSet", namespace, sts)
        other = _controller_of(live)
        if other is not None and other.get("kind") == DRAINER_KIND and other["uid"] != md["uid"]:
            return DrainerProblem(
                "NameTaken", f"{sts} is already run by Drainer {other.get('name')}"
            )
        checkpoint = int((body.get("status") or {}).get("checkpointTS") or 0)
        refused = sink_change(name, running_sink_type(live), sink_type(drainer), checkpoint)
        if refused:
            return DrainerProblem(CHANGE_REFUSED, refused)
        owner = owner_ref(DRAINER_KIND, md["name"], md["uid"])
        for obj in drainer_objects(cluster, namespace, spec, drainer, owner):
            if obj["kind"] == "StatefulSet":
                with_rollout(obj, live)
                keep_claims(obj, live)
            await self._kube.apply(obj)
        return None

    async def runs_it(self, cluster: str, namespace: str, body: Body) -> bool:
        """Whether the drainer's StatefulSet is this Drainer's (or nobody's)."""
        _, name = drainer_of(body)
        other = await self._controller(namespace, drainer_name(cluster, name))
        return (
            other is None
            or other.get("kind") != DRAINER_KIND
            or (other["uid"] == body["metadata"]["uid"])
        )

    async def delete_objects(self, cluster: str, namespace: str, body: Body) -> bool:
        """Delete the drainer's StatefulSet, Service, ConfigMap and volume claim if they are
        this Drainer's (or nobody's); False if another Drainer runs them."""
        if not await self.runs_it(cluster, namespace, body):
            return False
        _, name = drainer_of(body)
        await delete_drainer(self._kube, cluster, namespace, name)
        return True

    async def _controller(self, namespace: str, sts: str) -> dict[str, Any] | None:
        return _controller_of(await self._kube.get("apps/v1", "StatefulSet", namespace, sts))


def _controller_of(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    refs = (found or {}).get("metadata", {}).get("ownerReferences") or []
    return next((dict(r) for r in refs if r.get("controller")), None)


async def prepare_set(kube: KubeClient, obj: dict[str, Any]) -> str | None:
    """Before a StatefulSet is applied: its rollout set (template hash, partition:
    ``rollviews.with_rollout``) and its claim templates: grown volumes expanded and the set
    deleted with its pods orphaned, to be applied anew (``volumes.grow``); any other change
    of them refused (the live ones kept). Why a volume change is not applied, or None."""
    md = obj["metadata"]
    live = await kube.get("apps/v1", "StatefulSet", md["namespace"], md["name"])
    if live is not None and live["metadata"].get("deletionTimestamp"):
        await wait_gone(kube, md["namespace"], md["name"])  # an earlier growth's delete
        live = None
    with_rollout(obj, live)
    if live is None or "volumeClaimTemplates" not in live["spec"]:
        return None
    change = plan(
        md["name"],
        live["spec"]["volumeClaimTemplates"],
        obj["spec"].get("volumeClaimTemplates", []),
    )
    refused = change.refused
    if change.grow and refused is None:
        refused = await grow(kube, live, change.grow)
        if refused is None:
            return None  # the set is gone: applied anew with the asked claim templates
    keep_claims(obj, live)
    if refused:
        log.warning("%s", refused)
    return refused


def keep_claims(obj: dict[str, Any], live: Mapping[str, Any] | None) -> str | None:
    """Keep the live volumeClaimTemplates of a StatefulSet whose volumes are not grown here
    (a drainer's); why the asked ones are not applied (None when they are the same)."""
    if live is None or "volumeClaimTemplates" not in live["spec"]:
        return None
    kept = [
        {"metadata": {"name": c["metadata"]["name"]}, "spec": c["spec"]}
        for c in live["spec"]["volumeClaimTemplates"]
    ]
    refused = storage_change(
        obj["metadata"]["name"], kept, obj["spec"].get("volumeClaimTemplates", [])
    )
    obj["spec"]["volumeClaimTemplates"] = kept
    return refused


async def sync_statuses(kube: KubeClient, cluster: str, seen: Observed, now_ms: int) -> None:
    """Write each Pump's and Drainer's registry fields into its status (only what changed)."""
    pumps = {p.node_id: p for p in seen.pumps}
    drainers = {d.node_id: d for d in seen.drainers}
    for body in seen.pump_resources:
        node = body["metadata"]["name"]
        wanted = node_status(node, pumps.get(node), "maxCommitTS", now_ms)
        await _patch(kube, PUMP_KIND, body, wanted)
    for body in seen.drainer_resources:
        node = drainer_pod(cluster, drainer_of(body)[1])
        wanted = node_status(node, drainers.get(node), "checkpointTS", now_ms)
        await _patch(kube, DRAINER_KIND, body, wanted)


async def _patch(kube: KubeClient, kind: str, body: Body, wanted: dict[str, Any]) -> None:
    if changed(body.get("status") or {}, wanted):
        md = body["metadata"]
        await kube.patch_status(md["namespace"], md["name"], None, wanted, kind)
