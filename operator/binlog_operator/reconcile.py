"""Bringing a cluster's objects to its spec, taking pumps out first, and reading its state.

Invariant: the pump StatefulSet's replicas only goes down after ``close_pumps`` confirmed the
removed pumps offline; on any scale-down failure the StatefulSet keeps its current replicas (the
rest of the spec is still applied) and the reason is returned for status and events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import Any

from binlog_operator.configs import check_all
from binlog_operator.kube import KubeClient
from binlog_operator.manifests import build, drainer_name, pump_name, pump_pod
from binlog_operator.scaledown import PumpCloser, ScaleDownError, close_pumps, pods_to_close
from binlog_operator.spec import ClusterSpec, SpecError, parse
from coord.kv import Kv, KvError
from registry.registry import NodeRegistry
from registry.status import NodeKind, NodeStatus

log = logging.getLogger(__name__)

OpenKv = Callable[[Sequence[str]], AbstractAsyncContextManager[Kv]]
CloserFor = Callable[[str, str], PumpCloser]  # (namespace, cluster) -> closer


@dataclass(frozen=True)
class Outcome:
    spec: ClusterSpec
    pump_replicas: int
    scale_error: str | None = None


@dataclass(frozen=True)
class Observed:
    pump_replicas: int
    pumps: list[NodeStatus]
    drainers: list[NodeStatus]


class Reconciler:
    def __init__(
        self,
        kube: KubeClient,
        open_kv: OpenKv,
        closer_for: CloserFor,
        *,
        default_image: str,
        offline_timeout: float,
        etcd_timeout: float,
    ) -> None:
        self._kube = kube
        self._open_kv = open_kv
        self._closer_for = closer_for
        self._image = default_image
        self._offline_timeout = offline_timeout
        self._etcd_timeout = etcd_timeout

    def parse(self, raw: dict[str, Any]) -> ClusterSpec:
        return parse(raw, self._image)

    async def reconcile(self, name: str, namespace: str, uid: str, raw: dict[str, Any]) -> Outcome:
        """Apply every object; raises SpecError (bad spec) or KubeError."""
        spec = self.parse(raw)
        check_all(spec)
        current = await self.pump_replicas(name, namespace)
        replicas, error = spec.pumps.replicas, None
        if current is not None and replicas < current:
            try:
                await self.take_offline(name, namespace, spec, current, replicas)
            except ScaleDownError as e:
                log.warning(
                    "%s/%s: scale-down %d -> %d failed: %s", namespace, name, current, replicas, e
                )
                replicas, error = current, str(e)
        for obj in build(name, namespace, uid, spec, replicas):
            if obj["kind"] == "StatefulSet":
                await self._keep_claims(obj)
            await self._kube.apply(obj)
        return Outcome(spec, replicas, error)

    async def teardown(self, name: str, namespace: str, raw: dict[str, Any]) -> None:
        """Close every pump before the cluster goes; raises ScaleDownError (also when the spec
        is invalid but a pump StatefulSet exists: its pumps may hold binlogs)."""
        current = await self.pump_replicas(name, namespace)
        if not current:
            return
        try:
            spec = self.parse(raw)
        except SpecError as e:  # pumps may be running from an earlier, valid spec
            raise ScaleDownError(f"cannot take {current} pumps offline: invalid spec: {e}") from e
        await self.take_offline(name, namespace, spec, current, 0)

    async def take_offline(
        self, name: str, namespace: str, spec: ClusterSpec, current: int, desired: int
    ) -> None:
        pods = pods_to_close(current, desired, lambda i: pump_pod(name, i))
        async with AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(self._etcd_timeout):
                    kv = await stack.enter_async_context(self._open_kv(spec.etcd_endpoints))
            except (KvError, OSError, TimeoutError) as e:
                where = ", ".join(spec.etcd_endpoints)
                raise ScaleDownError(f"cannot reach etcd {where}: {e!r}") from e
            closer = self._closer_for(namespace, name)
            await close_pumps(pods, closer, NodeRegistry(kv), within=self._offline_timeout)

    async def observe(self, name: str, namespace: str, spec: ClusterSpec) -> Observed:
        """The pump StatefulSet's replicas and this cluster's registry records; raises KvError,
        TimeoutError or KubeError."""
        replicas = await self.pump_replicas(name, namespace) or 0
        async with asyncio.timeout(self._etcd_timeout), self._open_kv(spec.etcd_endpoints) as kv:
            registry = NodeRegistry(kv)
            pumps = await registry.list(NodeKind.PUMP)
            drainers = await registry.list(NodeKind.DRAINER)
        prefixes = tuple(f"{drainer_name(name, d.name)}-" for d in spec.drainers)
        return Observed(
            replicas,
            [p for p in pumps if p.node_id.startswith(f"{pump_name(name)}-")],
            [d for d in drainers if d.node_id.startswith(prefixes)] if prefixes else [],
        )

    async def pump_replicas(self, name: str, namespace: str) -> int | None:
        sts = await self._kube.get("apps/v1", "StatefulSet", namespace, pump_name(name))
        return None if sts is None else int(sts["spec"].get("replicas", 1))

    async def _keep_claims(self, obj: dict[str, Any]) -> None:
        """A StatefulSet's volumeClaimTemplates cannot change: keep the live ones."""
        md = obj["metadata"]
        live = await self._kube.get("apps/v1", "StatefulSet", md["namespace"], md["name"])
        if live is None or "volumeClaimTemplates" not in live["spec"]:
            return
        kept = [
            {"metadata": {"name": c["metadata"]["name"]}, "spec": c["spec"]}
            for c in live["spec"]["volumeClaimTemplates"]
        ]
        if _requests(obj["spec"].get("volumeClaimTemplates", [])) != _requests(kept):
            log.warning(
                "%s: storage cannot change on a StatefulSet; keeping %s",
                md["name"],
                _requests(kept),
            )
        obj["spec"]["volumeClaimTemplates"] = kept


def _requests(claims: list[dict[str, Any]]) -> list[tuple[object, object]]:
    return [(c["spec"].get("resources"), c["spec"].get("storageClassName")) for c in claims]
