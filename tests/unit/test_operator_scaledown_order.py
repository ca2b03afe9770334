"""A pump scale-down and a status pass running at the same time cannot bring a removed pump's
Pump back: the reconcile lowers the StatefulSet's replicas before deleting the Pump, and the
status pass (``observe``, then ``restore``) reads the Pumps before the replicas. Run against a
recording in-memory Kubernetes and the in-memory registry, with the status pass put at every
point of the scale-down."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

from binlog_operator import PUMP_KIND
from binlog_operator.kube import KubeClient
from binlog_operator.manifests import pump_name, pump_pod
from binlog_operator.reconcile import Reconciler
from tributary.coord.kv import Kv
from tributary.coord.memory import MemoryKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus

NS, NAME, UID = "ns1", "c1", "uid-1"
RAW: dict[str, Any] = {
    "etcd": {"endpoints": ["http://etcd-0:2379"]},
    "image": "tributary:test",
    "pumps": {"replicas": 1},
}
PUMP_1 = pump_pod(NAME, 1)


class RecordingKube:
    """The KubeClient calls the reconciler makes, on a dict of objects, each call logged; a
    ``hook`` runs before every call (the concurrent status pass goes in there)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.log: list[tuple[str, str, str]] = []
        self.hook: Any = None

    async def _step(self, op: str, kind: str, name: str) -> None:
        self.log.append((op, kind, name))
        if self.hook is not None:
            await self.hook(len(self.log))

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind, name = obj["kind"], obj["metadata"]["name"]
        await self._step("apply", kind, name)
        self.objects[(kind, name)] = copy.deepcopy(obj)
        return obj

    async def get(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        await self._step("get", kind, name)
        return copy.deepcopy(self.objects.get((kind, name)))

    async def list_labelled(
        self, api_version: str, kind: str, namespace: str, selector: str | None
    ) -> list[dict[str, Any]]:
        await self._step("list", kind, "")
        return [copy.deepcopy(o) for (k, _), o in self.objects.items() if k == kind]

    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        await self._step("delete", kind, name)
        return self.objects.pop((kind, name), None) is not None


class NoCloser:
    async def close(self, pod: str) -> None:
        raise AssertionError(f"{pod} is offline already: nothing to close")


async def scaled_down_by_two(status_pass_at: int | None) -> tuple[RecordingKube, set[str]]:
    """A cluster of 2 pumps (pump 1 offline already) scaled to 1, with a status pass run just
    before the ``status_pass_at``-th Kubernetes call of the reconcile; the Pumps left."""
    kube = RecordingKube()
    kv = MemoryKv()
    registry = NodeRegistry(kv)
    for i, state in ((0, NodeState.ONLINE), (1, NodeState.OFFLINE)):
        await registry.update(NodeKind.PUMP, NodeStatus(pump_pod(NAME, i), f"p{i}:8250", state))

    @asynccontextmanager
    async def open_kv(endpoints: Sequence[str]) -> AsyncIterator[Kv]:
        yield kv

    reconciler = Reconciler(
        cast(KubeClient, kube),
        open_kv,
        lambda target: NoCloser(),  # type: ignore[arg-type,return-value]
        default_image="tributary:test",
        offline_timeout=5,
        etcd_timeout=5,
    )
    for obj in _initial(reconciler):
        kube.objects[(obj["kind"], obj["metadata"]["name"])] = obj
    spec = reconciler.parse(RAW)
    passes = 0

    async def status_pass(n: int) -> None:
        nonlocal passes
        if n != status_pass_at or passes:
            return
        passes += 1
        kube.hook = None  # the pass's own calls run without a nested pass
        seen = await reconciler.observe(NAME, NS, spec)
        await reconciler.nodes.restore(NAME, NS, UID, seen, [])
        kube.hook = status_pass

    kube.hook = status_pass
    await reconciler.reconcile(NAME, NS, UID, copy.deepcopy(RAW))
    kube.hook = None
    if status_pass_at is not None:
        assert passes == 1
    left = {name for kind, name in kube.objects if kind == PUMP_KIND}
    return kube, left


def _initial(reconciler: Reconciler) -> list[dict[str, Any]]:
    """The objects of the cluster at 2 pumps, as an earlier reconcile left them."""
    from binlog_operator.manifests import build
    from binlog_operator.nodes import pump_resource

    spec = reconciler.parse({**RAW, "pumps": {"replicas": 2}})
    objs = [o for o in build(NAME, NS, UID, spec, 2)]
    return objs + [pump_resource(NAME, NS, UID, i) for i in range(2)]


async def test_the_replicas_go_down_before_the_removed_pumps_pump_is_deleted() -> None:
    kube, left = await scaled_down_by_two(None)
    assert left == {pump_pod(NAME, 0)}
    sts = kube.log.index(("apply", "StatefulSet", pump_name(NAME)))
    assert kube.log.index(("delete", PUMP_KIND, PUMP_1)) > sts


async def test_a_status_pass_anywhere_in_the_scale_down_leaves_the_pump_deleted() -> None:
    alone, _ = await scaled_down_by_two(None)
    assert len(alone.log) > 5
    for at in range(1, len(alone.log) + 1):
        kube, left = await scaled_down_by_two(at)
        assert left == {pump_pod(NAME, 0)}, f"status pass before call {at}: {kube.log}"
