"""The rolling update's driver and the reconcile's refusals on in-memory fakes: a partition is
lowered with the resourceVersion it was decided at, nothing is lowered when the registry cannot
be read, a reconcile holds a changed template, and an etcd holding another cluster id is
refused before anything is applied."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from binlog_operator.immutable import ChangeRefused
from binlog_operator.kube import KubeClient, KubeError
from binlog_operator.reconcile import Reconciler, Recorded
from binlog_operator.rolling import Rollout
from binlog_operator.rollviews import partition_of
from tributary.coord.cluster_id import ensure_cluster_id
from tributary.coord.kv import Kv, KvError
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.wire.ts import compose

NS, NAME, UID = "ns", "c", "uid-1"
RAW: dict[str, Any] = {
    "etcd": {"endpoints": ["http://etcd-0:2379"]},
    "image": "tributary:0.1.0",
    "pumps": {"replicas": 2},
}


class FakeKube:
    """The KubeClient calls of the reconcile and the roll, on a dict of objects; a patch checks
    the resourceVersion as the API server does."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.version = 0

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        return obj

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        key = (obj["kind"], obj["metadata"]["name"])
        live = self.objects.get(key, {})
        merged = {**copy.deepcopy(obj), "status": live.get("status", {})}
        self.objects[key] = self._stamp(merged)
        return merged

    async def get(self, api_version: str, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get((kind, name)))

    async def list_labelled(
        self, api_version: str, kind: str, ns: str, selector: str | None
    ) -> list[dict[str, Any]]:
        """As a list answers: the items without their apiVersion and kind."""
        found = [copy.deepcopy(o) for (k, _), o in self.objects.items() if k == kind]
        for item in found:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return found

    async def delete(self, api_version: str, kind: str, ns: str, name: str) -> bool:
        return self.objects.pop((kind, name), None) is not None

    async def patch(
        self, api_version: str, kind: str, ns: str, name: str, version: str, changes: Any
    ) -> None:
        live = self.objects[(kind, name)]
        if live["metadata"]["resourceVersion"] != version:
            raise KubeError("conflict", 409)
        live["spec"]["updateStrategy"] = changes["spec"]["updateStrategy"]
        self.patches.append((name, changes))
        self._stamp(live)


def kv_opener(kv: Kv | None) -> Any:
    @asynccontextmanager
    async def open_kv(endpoints: Sequence[str]) -> AsyncIterator[Kv]:
        if kv is None:
            raise KvError("connection refused")
        yield kv

    return open_kv


def reconciler(kube: FakeKube, kv: Kv | None) -> Reconciler:
    return Reconciler(
        cast(KubeClient, kube),
        kv_opener(kv),
        lambda target: None,  # type: ignore[arg-type,return-value]
        default_image="tributary:0.1.0",
        offline_timeout=5,
        etcd_timeout=5,
    )


def controller_ran(kube: FakeKube, revision: str, pods: dict[int, str]) -> None:
    """What the StatefulSet controller would have done: its status current, pods as given."""
    sts = kube.objects[("StatefulSet", "c-pump")]
    generation = sts["metadata"]["generation"] = int(sts["metadata"]["resourceVersion"])
    sts["status"] = {"observedGeneration": generation, "updateRevision": revision}
    for ordinal, rev in pods.items():
        name = f"c-pump-{ordinal}"
        kube.objects[("Pod", name)] = {
            "metadata": {
                "name": name,
                "labels": {"controller-revision-hash": rev},
                "ownerReferences": [{"kind": "StatefulSet", "name": "c-pump", "controller": True}],
            },
            "spec": {"containers": [{"image": f"tributary:{rev}"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }


async def online_pumps(kv: Kv, lag_s: int = 1) -> None:
    registry = NodeRegistry(kv)
    for i in range(2):
        record = NodeStatus(
            f"c-pump-{i}",
            f"c-pump-{i}:8250",
            NodeState.ONLINE,
            max_commit_ts=compose(1_700_000_000_000, 0),
            update_ts=compose(1_700_000_000_000 + lag_s * 1000, 0),
        )
        await registry.update(NodeKind.PUMP, record)


async def test_a_new_image_is_held_then_released_one_pump_at_a_time() -> None:
    kube, kv = FakeKube(), MemoryKv()
    await online_pumps(kv)
    r = reconciler(kube, kv)
    await r.reconcile(NAME, NS, UID, copy.deepcopy(RAW))
    assert partition_of(kube.objects[("StatefulSet", "c-pump")]) == 0  # new: nothing to hold
    controller_ran(kube, "0.1.0", {0: "0.1.0", 1: "0.1.0"})
    await r.reconcile(NAME, NS, UID, {**RAW, "image": "tributary:0.1.0-next"})
    assert partition_of(kube.objects[("StatefulSet", "c-pump")]) == 2  # held
    controller_ran(kube, "0.1.0-next", {})
    roll = Rollout(cast(KubeClient, kube), kv_opener(kv), etcd_timeout=5, max_lag=30)
    spec = r.parse(RAW)
    report = await roll.advance(NAME, NS, spec, watching=False)
    assert report.stepped == ("c-pump-1",)
    assert partition_of(kube.objects[("StatefulSet", "c-pump")]) == 1
    assert report.versions["pumps"] == "0.1.0"
    # the controller has not replaced pod 1 yet: no further step
    controller_ran(kube, "0.1.0-next", {})
    assert (await roll.advance(NAME, NS, spec, watching=True)).stepped == ()
    controller_ran(kube, "0.1.0-next", {1: "0.1.0-next"})
    report = await roll.advance(NAME, NS, spec, watching=True)
    assert report.stepped == ("c-pump-0",)
    assert report.versions["pumps"] == "0.1.0,0.1.0-next"
    assert report.plan.message() == "pumps 1/2 updated; waiting for c-pump-0: being replaced"
    controller_ran(kube, "0.1.0-next", {0: "0.1.0-next"})
    report = await roll.advance(NAME, NS, spec, watching=True)
    assert not report.plan.rolling and report.plan.waiting == ""
    assert report.versions["pumps"] == "0.1.0-next"
    # a reconcile of the same spec keeps the partition where the roll left it
    await r.reconcile(NAME, NS, UID, {**RAW, "image": "tributary:0.1.0-next"})
    assert partition_of(kube.objects[("StatefulSet", "c-pump")]) == 0


async def test_a_lagging_pump_or_an_unreadable_registry_holds_the_roll() -> None:
    kube, kv = FakeKube(), MemoryKv()
    await online_pumps(kv, lag_s=90)
    r = reconciler(kube, kv)
    await r.reconcile(NAME, NS, UID, copy.deepcopy(RAW))
    await r.reconcile(NAME, NS, UID, {**RAW, "image": "tributary:0.1.0-next"})
    sts = kube.objects[("StatefulSet", "c-pump")]
    sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 1
    controller_ran(kube, "next", {0: "old", 1: "next"})
    spec = r.parse(RAW)
    lagging = Rollout(cast(KubeClient, kube), kv_opener(kv), etcd_timeout=5, max_lag=30)
    report = await lagging.advance(NAME, NS, spec, watching=True)
    assert report.stepped == () and report.plan.waiting == "c-pump-1: 90 s behind (at most 30 s)"
    unreadable = Rollout(cast(KubeClient, kube), kv_opener(None), etcd_timeout=5, max_lag=300)
    report = await unreadable.advance(NAME, NS, spec, watching=True)
    assert report.stepped == () and report.plan.waiting.startswith("the registry (KvError(")


async def test_a_step_decided_on_a_stale_read_is_not_made() -> None:
    kube, kv = FakeKube(), MemoryKv()
    await online_pumps(kv)
    r = reconciler(kube, kv)
    await r.reconcile(NAME, NS, UID, copy.deepcopy(RAW))
    await r.reconcile(NAME, NS, UID, {**RAW, "image": "tributary:0.1.0-next"})
    controller_ran(kube, "next", {0: "old", 1: "old"})
    original = kube.list_labelled

    async def moved_on(*args: Any) -> list[dict[str, Any]]:
        found = await original(*args)
        kube._stamp(kube.objects[("StatefulSet", "c-pump")])  # applied again meanwhile
        return found

    kube.list_labelled = moved_on  # type: ignore[method-assign]
    roll = Rollout(cast(KubeClient, kube), kv_opener(kv), etcd_timeout=5, max_lag=30)
    report = await roll.advance(NAME, NS, r.parse(RAW), watching=False)
    assert report.stepped == () and kube.patches == []


async def test_an_etcd_with_another_cluster_id_is_refused_before_anything_is_applied() -> None:
    kube, other = FakeKube(), MemoryKv()
    await ensure_cluster_id(other, lambda: 7)
    r = reconciler(kube, other)
    moved = {**RAW, "etcd": {"endpoints": ["http://other:2379"]}}
    recorded = Recorded(("http://etcd-0:2379",), "42")
    with pytest.raises(ChangeRefused, match="pumps hold binlogs of cluster 42") as refused:
        await r.reconcile(NAME, NS, UID, moved, recorded)
    assert not refused.value.retriable and kube.objects == {}
    with pytest.raises(ChangeRefused, match="cannot read the cluster id") as unreachable:
        await reconciler(kube, None).reconcile(NAME, NS, UID, moved, recorded)
    assert unreachable.value.retriable
    same = MemoryKv()
    await ensure_cluster_id(same, lambda: 42)  # another member of the same etcd
    await reconciler(kube, same).reconcile(NAME, NS, UID, moved, recorded)
    assert ("StatefulSet", "c-pump") in kube.objects
