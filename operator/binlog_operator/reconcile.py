"""Bringing a cluster's objects to its spec, taking pumps and removed drainers out first, and
reading its state.

Invariants: the pump StatefulSet's replicas only goes down after ``close_pumps`` confirmed the
removed pumps offline; on any scale-down failure the StatefulSet keeps its current replicas (the
rest of the spec is still applied) and the reason is returned for status and events. A drainer
that left the spec keeps its objects until it is offline in the registry (closed through its
HTTP API first); a failure keeps them and is returned the same way. With ``spec.tls.secretName``
the pumps and drainers are reached over HTTPS with the Secret's CA and client certificate.
A deleted cluster's pumps are closed first (a failure blocks the deletion), then its drainers,
best effort within ``drainer_close_timeout`` (``teardown``). Nothing is applied when the spec's
etcd holds another cluster id than the one recorded (``immutable.etcd_change``), and every
StatefulSet is applied with its rollout partition (``rollviews.with_rollout``): a changed pod
template replaces no pod until the roll (``rolling``) reaches it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from binlog_operator.changefeeds import read_changefeeds
from binlog_operator.configs import (
    CAPTURE_CLUSTER_ID,
    DRAINER_HTTP_PORT,
    PUMP_HTTP_PORT,
    check_all,
    drainer_name,
)
from binlog_operator.drainers import delete_drainer, drainer_pod, stale_drainers
from binlog_operator.immutable import CHANGE_REFUSED, ChangeRefused, etcd_change
from binlog_operator.kube import KubeClient, KubeError
from binlog_operator.manifests import build, pump_name, pump_pod
from binlog_operator.noderes import DrainerProblem, NodeResources, prepare_set
from binlog_operator.nodes import Observed, drainer_of, owned_by
from binlog_operator.pumps import Target
from binlog_operator.scaledown import PumpCloser, ScaleDownError, close_pumps, pods_to_close
from binlog_operator.spec import DEFAULT_SPARK_ACCOUNT, ClusterSpec, SpecError, parse_cluster
from binlog_operator.teardown import close_within
from binlog_operator.tlsctx import context_for
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.kv import Kv, KvError
from tributary.registry.registry import NodeRegistry, RegistryError
from tributary.registry.status import NodeKind, NodeState, StatusError

log = logging.getLogger(__name__)

OpenKv = Callable[[Sequence[str]], AbstractAsyncContextManager[Kv]]
CloserFor = Callable[[Target], PumpCloser]


@dataclass(frozen=True)
class Outcome:
    spec: ClusterSpec
    pump_replicas: int
    scale_error: str | None = None
    drainer_error: str | None = None  # a removed drainer could not be taken offline
    removed_drainers: tuple[str, ...] = ()
    drainer_count: int = 0  # spec.drainers entries
    # each Drainer of the cluster (resource name): its problem, None when it runs as specified
    drainers: dict[str, DrainerProblem | None] = field(default_factory=dict)
    refused: tuple[str, ...] = ()  # changes not applied because they cannot be made in place


@dataclass(frozen=True)
class Recorded:
    """What the cluster's status says was applied: the etcd endpoints of the last successful
    reconcile and the cluster id read there (None: not read yet)."""

    etcd_endpoints: tuple[str, ...] = ()
    cluster_id: str | None = None


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
        retry_delay: float = 15.0,
        drainer_close_timeout: float = 120.0,
        spark_account: str = DEFAULT_SPARK_ACCOUNT,
    ) -> None:
        self._kube = kube
        self._open_kv = open_kv
        self._closer_for = closer_for
        self._image = default_image
        self._offline_timeout = offline_timeout
        self._etcd_timeout = etcd_timeout
        self._retry_delay = retry_delay
        self._drainer_close_timeout = drainer_close_timeout
        self._spark_account = spark_account
        self.nodes = NodeResources(kube, spark_account)

    def parse(self, raw: dict[str, Any]) -> ClusterSpec:
        """The cluster's own spec (no drainers: each is its Drainer's business)."""
        return self.parse_with_entries(raw)[0]

    def parse_with_entries(
        self, raw: Mapping[str, Any]
    ) -> tuple[ClusterSpec, tuple[dict[str, Any], ...]]:
        return parse_cluster(raw, self._image)

    async def reconcile(
        self,
        name: str,
        namespace: str,
        uid: str,
        raw: dict[str, Any],
        recorded: Recorded | None = None,
    ) -> Outcome:
        """Apply every object, the Pump and Drainer resources and every Drainer's objects;
        raises SpecError (bad cluster spec), ChangeRefused (an etcd holding another cluster id
        than ``recorded``: nothing applied) or KubeError. A Drainer's own problem is returned in
        ``Outcome.drainers``, a volume that cannot change in ``Outcome.refused``."""
        spec, entries = self.parse_with_entries(raw)
        check_all(spec, name, namespace)
        await self._check_etcd(spec, recorded or Recorded())
        current = await self.pump_replicas(name, namespace)
        replicas, error, removed_pumps = spec.pumps.replicas, None, 0
        if current is not None and replicas < current:
            try:
                await self.take_offline(name, namespace, spec, current, replicas)
            except ScaleDownError as e:
                log.warning(
                    "%s/%s: scale-down %d -> %d failed: %s", namespace, name, current, replicas, e
                )
                replicas, error = current, str(e)
            else:  # the removed pumps are offline: they leave through their resources
                removed_pumps = current
        refused: list[str] = []
        for obj in build(name, namespace, uid, spec, replicas):
            if obj["kind"] == "StatefulSet" and (why := await prepare_set(self._kube, obj)):
                refused.append(why)
            await self._kube.apply(obj)
        if removed_pumps:
            # Only once the StatefulSet says fewer replicas: a status pass that reads the Pumps
            # and then the replicas (``observe``) and finds a removed pump's Pump gone must also
            # find its ordinal gone, or it would put the Pump back (``NodeResources.restore``).
            await self.nodes.delete_pumps(name, namespace, replicas, removed_pumps)
        await self.nodes.apply_pumps(name, namespace, uid, replicas)
        await self.nodes.apply_drainers(name, namespace, uid, entries)
        names = {str(e["name"]) for e in entries}
        drainers = await self.nodes.drainers_of(name, namespace)
        problems: dict[str, DrainerProblem | None] = {}
        for body in drainers:
            if "deletionTimestamp" not in body["metadata"]:
                problem = await self.nodes.run_drainer(name, namespace, uid, spec, names, body)
                problems[body["metadata"]["name"]] = problem
                if problem and problem.reason == CHANGE_REFUSED and owned_by(body, uid):
                    refused.append(problem.message)  # an entry of this spec: its edit refused
        removed, drainer_error = await self.remove_drainers(name, namespace, uid, spec, names)
        return Outcome(
            spec, replicas, error, drainer_error, removed, len(entries), problems, tuple(refused)
        )

    async def _check_etcd(self, spec: ClusterSpec, recorded: Recorded) -> None:
        """ChangeRefused if the spec's etcd is not the one the pumps' cluster id lives in."""
        old = recorded.etcd_endpoints
        if not old or recorded.cluster_id is None or sorted(old) == sorted(spec.etcd_endpoints):
            return
        try:
            async with (
                asyncio.timeout(self._etcd_timeout),
                self._open_kv(spec.etcd_endpoints) as kv,
            ):
                found = await read_cluster_id(kv)
        except (KvError, OSError, TimeoutError) as e:
            raise ChangeRefused(
                f"spec.etcd.endpoints: cannot read the cluster id at "
                f"{', '.join(spec.etcd_endpoints)} to check that it is still "
                f"{recorded.cluster_id}: {e!r}",
                retriable=True,
            ) from e
        why = etcd_change(old, spec.etcd_endpoints, recorded.cluster_id, found)
        if why:
            raise ChangeRefused(why)

    async def remove_drainers(
        self, name: str, namespace: str, uid: str, spec: ClusterSpec, wanted: set[str]
    ) -> tuple[tuple[str, ...], str | None]:
        """Take drainers that left the spec offline, then delete their objects and their
        Drainer: (the drainers removed, why the others were kept). Raises KubeError."""
        owned = [
            b
            for b in await self.nodes.drainers_of(name, namespace)
            if owned_by(b, uid) and drainer_of(b)[1] not in wanted
        ]
        legacy = await stale_drainers(self._kube, name, namespace, uid, wanted)
        stale = sorted({drainer_of(b)[1] for b in owned} | set(legacy))
        resources = {drainer_of(b)[1]: b["metadata"]["name"] for b in owned}
        removed: list[str] = []
        for drainer in stale:
            target = Target(namespace, drainer_name(name, drainer), DRAINER_HTTP_PORT)
            try:
                await self._offline(
                    spec, target, [drainer_pod(name, drainer)], NodeKind.DRAINER, namespace
                )
            except ScaleDownError as e:
                log.warning("%s/%s: drainer %s kept: %s", namespace, name, drainer, e)
                return tuple(removed), f"drainer {drainer} removed from the spec is kept: {e}"
            await delete_drainer(self._kube, name, namespace, drainer)
            if drainer in resources:
                await self.nodes.delete_drainer_resource(namespace, resources[drainer])
            log.info("%s/%s: drainer %s offline, its objects deleted", namespace, name, drainer)
            removed.append(drainer)
        return tuple(removed), None

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

    async def close_drainers(
        self, name: str, namespace: str, uid: str, raw: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        """After ``teardown``: close every drainer of the cluster (those in the spec and any
        whose objects it still owns), retrying every ``retry_delay`` for at most
        ``drainer_close_timeout`` seconds. Returns (the drainers, {drainer: why it is left});
        never raises: the deletion goes on whatever happens here."""
        try:
            owned = await stale_drainers(self._kube, name, namespace, uid, set())
            owned += [drainer_of(b)[1] for b in await self.nodes.drainers_of(name, namespace)]
        except KubeError as e:
            log.warning(
                "%s/%s: drainer objects not listed, closing the spec's: %s", namespace, name, e
            )
            owned = []
        try:
            spec, entries = self.parse_with_entries(raw)
        except SpecError as e:
            why = f"invalid spec, its etcd is unknown: {e}"
            return sorted(set(owned)), {d: why for d in owned}
        drainers = sorted(set(owned) | {str(e["name"]) for e in entries})

        async def attempt(drainer: str, within: float) -> None:
            target = Target(namespace, drainer_name(name, drainer), DRAINER_HTTP_PORT)
            pods = [drainer_pod(name, drainer)]
            try:
                await self._offline(spec, target, pods, NodeKind.DRAINER, namespace, within)
            except KubeError as e:  # the TLS Secret could not be read
                raise ScaleDownError(f"drainer {drainer}: {e}") from e

        left = await close_within(
            drainers, attempt, budget=self._drainer_close_timeout, delay=self._retry_delay
        )
        return drainers, left

    async def close_drainer(
        self, name: str, namespace: str, spec: ClusterSpec, drainer: str
    ) -> None:
        """Close one drainer of cluster ``name`` and wait until it is offline (ScaleDownError,
        KubeError if that cannot be done now)."""
        target = Target(namespace, drainer_name(name, drainer), DRAINER_HTTP_PORT)
        await self._offline(spec, target, [drainer_pod(name, drainer)], NodeKind.DRAINER, namespace)

    async def close_pump(self, name: str, namespace: str, spec: ClusterSpec, pod: str) -> None:
        """Close one pump of cluster ``name`` and wait until it is offline."""
        target = Target(namespace, pump_name(name), PUMP_HTTP_PORT)
        await self._offline(spec, target, [pod], NodeKind.PUMP, namespace)

    async def take_offline(
        self, name: str, namespace: str, spec: ClusterSpec, current: int, desired: int
    ) -> None:
        pods = pods_to_close(current, desired, lambda i: pump_pod(name, i))
        target = Target(namespace, pump_name(name), PUMP_HTTP_PORT)
        await self._offline(spec, target, pods, NodeKind.PUMP, namespace)

    async def _offline(
        self,
        spec: ClusterSpec,
        target: Target,
        pods: list[str],
        kind: NodeKind,
        namespace: str,
        within: float | None = None,
    ) -> None:
        """Close ``pods`` (pumps or drainers) and wait until the registry shows them offline
        (at most ``within`` seconds, default ``offline_timeout``); ScaleDownError if that cannot
        be done now."""
        async with AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(self._etcd_timeout):
                    kv = await stack.enter_async_context(self._open_kv(spec.etcd_endpoints))
            except (KvError, OSError, TimeoutError) as e:
                where = ", ".join(spec.etcd_endpoints)
                raise ScaleDownError(f"cannot reach etcd {where}: {e!r}") from e
            registry = NodeRegistry(kv)
            if spec.tls_secret and await _any_to_close(registry, pods, kind):
                tls = await context_for(self._kube, namespace, spec.tls_secret)
                target = replace(target, tls=tls)
            what = "pump" if kind is NodeKind.PUMP else "drainer"
            closer = self._closer_for(replace(target, what=what))
            wait = self._offline_timeout if within is None else min(within, self._offline_timeout)
            await close_pumps(pods, closer, registry, within=wait, kind=kind)

    async def observe(self, name: str, namespace: str, spec: ClusterSpec) -> Observed:
        """The pump StatefulSet's replicas and this cluster's registry records; raises KvError,
        TimeoutError or KubeError.

        The Pumps are read before the replicas: ``reconcile`` deletes a removed pump's Pump only
        after lowering the replicas, so a Pump found missing here is never one of an ordinal
        that the replicas read after it still count (restoring it would bring it back)."""
        pump_resources = await self.nodes.pumps_of(name, namespace)
        drainer_resources = await self.nodes.drainers_of(name, namespace)
        replicas = await self.pump_replicas(name, namespace) or 0
        async with asyncio.timeout(self._etcd_timeout), self._open_kv(spec.etcd_endpoints) as kv:
            registry = NodeRegistry(kv)
            pumps = await registry.list(NodeKind.PUMP)
            drainers = await registry.list(NodeKind.DRAINER)
            feeds = await read_changefeeds(kv, CAPTURE_CLUSTER_ID)
            cluster_id = await read_cluster_id(kv)
        pods = {drainer_pod(name, drainer_of(b)[1]) for b in drainer_resources}
        return Observed(
            replicas,
            [p for p in pumps if p.node_id.startswith(f"{pump_name(name)}-")],
            [d for d in drainers if d.node_id in pods],
            feeds,
            pump_resources,
            drainer_resources,
            cluster_id,
        )

    async def pump_replicas(self, name: str, namespace: str) -> int | None:
        sts = await self._kube.get("apps/v1", "StatefulSet", namespace, pump_name(name))
        return None if sts is None else int(sts["spec"].get("replicas", 1))


async def _any_to_close(registry: NodeRegistry, pods: list[str], kind: NodeKind) -> bool:
    """Whether some pod is registered online (the only state that gets a close request)."""
    for pod in pods:
        try:
            status = await registry.get(kind, pod)
        except (RegistryError, StatusError, KvError):
            return True  # the close loop reports an unreadable record itself
        if status is not None and status.state is NodeState.ONLINE:
            return True
    return False
