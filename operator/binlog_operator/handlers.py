"""kopf handlers for BinlogCluster: thin translations between kopf and ``Reconciler``.

Run with ``kopf run -m binlog_operator.handlers --all-namespaces`` (or ``--namespace``); it
imports ``nodehandlers``, ``rollhandlers`` and ``scalehandlers``, so the Pump and Drainer
handlers, the rolling update's timer and the pumps' auto pilot's timer are registered too.
Invariant: every handler outcome is visible on the resource: a bad spec sets Degraded/InvalidSpec
and stops retrying (PermanentError); a change that cannot be made in place sets
Degraded/ChangeRefused (nothing applied when it is the cluster's etcd; the rest applied when it
is a volume or an entry's sink type); a failed scale-down, a removed drainer that cannot be taken
offline, or an unreachable API/etcd sets Degraded with the reason, posts a Warning event and
retries later (TemporaryError), leaving the pump StatefulSet (and the drainer's objects) as they
were. Deleting a cluster closes its pumps (blocking until done, or until the skip annotation) and
then its drainers (best effort: after ``drainer_close_timeout`` the deletion goes on, and a
Warning event ``DrainersLeftOnline`` names each drainer left and why). Conditions are written
only through ``ConditionWriter`` (read-modify-write with a resourceVersion precondition), never
as a whole list through kopf's patch, so the reconcile handler and the status timer cannot
overwrite each other's condition with a stale copy. The status timer also shows each pump's
volume and free space (``status.pumpStorage``, ``PumpStorageFull``, ``VolumeResizePending``:
``pumpstorage``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

import binlog_operator.nodehandlers  # registers the Pump/Drainer handlers
import binlog_operator.rollhandlers  # registers the rolling update's timer
import binlog_operator.scalehandlers  # noqa: F401  (registers the pumps' auto pilot's timer)
from binlog_operator import DRAINER_KIND, GROUP, PLURAL, VERSION, pumpstorage
from binlog_operator.conditions import Change
from binlog_operator.configs import drainer_name
from binlog_operator.context import Context
from binlog_operator.feedsync import SyncOutcome, with_errors
from binlog_operator.immutable import CHANGE_REFUSED, ChangeRefused
from binlog_operator.kube import Credentials, KubeError, ca_pem
from binlog_operator.manifests import pump_pod, pump_selector
from binlog_operator.noderes import sync_statuses
from binlog_operator.nodes import drainer_of
from binlog_operator.options import Options, from_env
from binlog_operator.pumps import addresses_from_env
from binlog_operator.reconcile import Recorded
from binlog_operator.scaledown import ScaleDownError
from binlog_operator.spec import SpecError
from binlog_operator.status import node_entries, online, readiness
from binlog_operator.tlsctx import context_for
from tributary.coord.kv import KvError

log = logging.getLogger(__name__)
OPTIONS: Options = from_env()
_ADDRESSES = addresses_from_env()
SKIP_OFFLINE = "binlog.io/skip-pump-offline"
RESOURCE = (GROUP, VERSION, PLURAL)


def recorded(body: kopf.Body) -> Recorded:
    """The etcd endpoints last applied and the cluster id read there (status)."""
    status = body.get("status") or {}
    cluster_id = status.get("clusterID")
    return Recorded(
        tuple(sorted(str(e) for e in status.get("etcdEndpoints") or ())),
        str(cluster_id) if cluster_id else None,
    )


def managed_feeds(body: kopf.Body) -> dict[str, str]:
    """{id: config hash} of the changefeeds the operator applied (status.managedChangefeeds)."""
    items = (body.get("status") or {}).get("managedChangefeeds") or []
    return {str(i["id"]): str(i.get("configHash", "")) for i in items if isinstance(i, dict)}


def credentials(settings: kopf.OperatorSettings) -> Credentials:
    info = kopf.login_with_service_account(settings=settings) or kopf.login_with_kubeconfig(
        settings=settings
    )
    if info is None:
        raise kopf.PermanentError("no in-cluster service account and no kubeconfig")
    return Credentials(
        server=info.server,
        token=info.token,
        ca_pem=ca_pem(info.ca_data),
        ca_path=str(info.ca_path) if info.ca_path else None,
        cert_path=str(info.certificate_path) if info.certificate_path else None,
        key_path=str(info.private_key_path) if info.private_key_path else None,
        insecure=bool(info.insecure),
    )


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.peering.standalone = True
    settings.persistence.finalizer = "binlog.io/pumps-offline"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="binlog.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="binlog.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO
    memo.ctx = Context(credentials(settings), OPTIONS)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    ctx: Context | None = memo.get("ctx")
    if ctx is not None:
        await ctx.close()


@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE)
@kopf.on.resume(*RESOURCE)
async def reconcile(
    body: kopf.Body,
    name: str,
    namespace: str | None,
    meta: kopf.Meta,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    ctx: Context = memo.ctx
    assert namespace is not None  # BinlogCluster is namespaced
    try:
        async with ctx.lock(namespace, name):
            outcome = await ctx.reconciler.reconcile(
                name, namespace, meta["uid"], dict(body["spec"]), recorded(body)
            )
    except SpecError as e:
        await ctx.report(namespace, name, Change("Degraded", True, "InvalidSpec", str(e)))
        kopf.warn(body, reason="InvalidSpec", message=str(e))
        raise kopf.PermanentError(f"invalid spec: {e}") from e
    except ChangeRefused as e:
        await ctx.report(namespace, name, Change("Degraded", True, CHANGE_REFUSED, str(e)[:1000]))
        kopf.warn(body, reason=CHANGE_REFUSED, message=str(e)[:1000])
        if e.retriable:
            raise kopf.TemporaryError(str(e), delay=OPTIONS.retry_delay) from e
        raise kopf.PermanentError(f"change refused: {e}") from e
    except KubeError as e:
        await ctx.report(namespace, name, Change("Degraded", True, "ApiError", str(e)[:500]))
        if not e.retriable:
            kopf.warn(body, reason="ApiError", message=str(e)[:500])
        raise kopf.TemporaryError(str(e), delay=OPTIONS.retry_delay) from e
    patch.status["pumpReplicas"] = outcome.pump_replicas
    patch.status["pumpSelector"] = pump_selector(name)
    patch.status["drainerCount"] = outcome.drainer_count
    for drainer, problem in outcome.drainers.items():
        await ctx.report_node(DRAINER_KIND, namespace, drainer, problem)
    patch.status["observedGeneration"] = meta.get("generation")
    patch.status["etcdEndpoints"] = list(outcome.spec.etcd_endpoints)
    wanted = outcome.spec.pumps.replicas
    for drainer in outcome.removed_drainers:
        kopf.info(body, reason="DrainerRemoved", message=f"drainer {drainer} offline and deleted")
    if outcome.scale_error is not None:
        message = (
            f"scale-down of pumps {outcome.pump_replicas} -> {wanted} held back: "
            f"{outcome.scale_error}"
        )
        await ctx.report(
            namespace,
            name,
            Change("Degraded", True, "ScaleDownFailed", message),
            Change("Progressing", True, "ScalingDown", message),
        )
        kopf.warn(body, reason="ScaleDownFailed", message=message)
        raise kopf.TemporaryError(message, delay=OPTIONS.retry_delay)
    if outcome.drainer_error is not None:
        message = outcome.drainer_error
        await ctx.report(
            namespace,
            name,
            Change("Degraded", True, "DrainerRemovalFailed", message),
            Change("Progressing", True, "RemovingDrainer", message),
        )
        kopf.warn(body, reason="DrainerRemovalFailed", message=message)
        raise kopf.TemporaryError(message, delay=OPTIONS.retry_delay)
    degraded = Change("Degraded", False, "Reconciled")
    if outcome.refused:  # the rest is applied; these stay as they run until the spec is fixed
        message = "; ".join(outcome.refused)[:1000]
        degraded = Change("Degraded", True, CHANGE_REFUSED, message)
        kopf.warn(body, reason=CHANGE_REFUSED, message=message)
    try:
        await ctx.conditions.set(
            namespace,
            name,
            degraded,
            Change("Progressing", False, "Reconciled", f"{wanted} pumps applied"),
        )
    except KubeError as e:
        raise kopf.TemporaryError(f"conditions: {e}", delay=OPTIONS.retry_delay) from e
    kopf.info(
        body,
        reason="Reconciled",
        message=f"{wanted} pumps, "
        f"{outcome.drainer_count} drainers, {outcome.spec.captures.replicas} captures",
    )


@kopf.on.delete(*RESOURCE)
async def teardown(
    body: kopf.Body, name: str, namespace: str | None, meta: kopf.Meta, memo: kopf.Memo, **_: Any
) -> None:
    ctx: Context = memo.ctx
    assert namespace is not None
    if meta.get("annotations", {}).get(SKIP_OFFLINE) == "true":
        log.warning(
            "%s/%s deleted without taking pumps offline (%s)", namespace, name, SKIP_OFFLINE
        )
        return
    try:
        await ctx.reconciler.teardown(name, namespace, dict(body["spec"]))
    except (ScaleDownError, KubeError) as e:
        kopf.warn(body, reason="TeardownBlocked", message=f"pumps not offline yet: {e}")
        raise kopf.TemporaryError(str(e), delay=OPTIONS.retry_delay) from e
    await _close_drainers(ctx, body, name, namespace, meta["uid"])
    await ctx.reconciler.nodes.delete_owned(name, namespace, meta["uid"])
    ctx.forget(namespace, name)


async def _close_drainers(
    ctx: Context, body: kopf.Body, name: str, namespace: str, uid: str
) -> None:
    """Best effort: a drainer that cannot be closed is reported, and the deletion goes on."""
    drainers, left = await ctx.reconciler.close_drainers(name, namespace, uid, dict(body["spec"]))
    closed = [drainer_name(name, d) for d in drainers if d not in left]
    if closed:
        message = f"offline (or never registered): {', '.join(closed)}"
        kopf.info(body, reason="DrainersClosed", message=message)
    if left:
        detail = "; ".join(f"{drainer_name(name, d)}-0: {why}" for d, why in left.items())
        message = (
            f"deleting without closing {len(left)} drainer(s): {detail}. A drainer left "
            "online holds every pump of this etcd from going offline: mark it offline with "
            "binlogctl (-cmd update-drainer -node-id <pod> -state offline)"
        )
        log.warning("%s/%s: %s", namespace, name, message)
        kopf.warn(body, reason="DrainersLeftOnline", message=message[:1000])


@kopf.timer(*RESOURCE, interval=OPTIONS.status_interval, initial_delay=1.0)
async def refresh_status(
    body: kopf.Body,
    name: str,
    namespace: str | None,
    meta: kopf.Meta,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    ctx: Context = memo.ctx
    assert namespace is not None
    if (live := ctx.live_spec(body)) is None:
        return
    spec, entries = live
    synced: SyncOutcome | None = None
    try:
        synced = await ctx.feeds.sync(name, namespace, spec, managed_feeds(body))
    except (KvError, KubeError, OSError, TimeoutError) as e:
        log.warning("%s/%s: changefeeds not synced: %r", namespace, name, e)
    else:
        patch.status["managedChangefeeds"] = [
            {"id": i, "configHash": h} for i, h in synced.managed.items()
        ]
    try:
        seen = await ctx.reconciler.observe(name, namespace, spec)
    except (KvError, KubeError, OSError, TimeoutError) as e:
        await ctx.report(
            namespace, name, Change("Ready", False, "RegistryUnreachable", f"{e!r}"[:500])
        )
        return
    pods = [pump_pod(name, i) for i in range(seen.pump_replicas)]
    drainers = [drainer_name(name, drainer_of(b)[1]) for b in seen.drainer_resources]
    ready, why = readiness(pods, seen.pumps, drainers, seen.drainers)
    patch.status["pumps"] = node_entries(seen.pumps)
    patch.status["drainers"] = node_entries(seen.drainers)
    declared = [f.id for f in spec.captures.changefeeds]
    errors = synced.errors if synced is not None else {}
    patch.status["changefeeds"] = with_errors(seen.changefeeds, declared, errors)
    applied = recorded(body).etcd_endpoints == tuple(sorted(spec.etcd_endpoints))
    if seen.cluster_id is not None and applied:
        patch.status["clusterID"] = str(seen.cluster_id)  # read where the pumps were applied
    patch.status["pumpsOnline"] = f"{online(seen.pumps, pods)}/{len(pods)}"
    patch.status["drainersOnline"] = f"{online(seen.drainers)}/{len(drainers)}"
    try:
        await sync_statuses(ctx.kube, name, seen, int(time.time() * 1000))
        await ctx.reconciler.nodes.restore(name, namespace, meta["uid"], seen, entries)
    except KubeError as e:
        log.warning("%s/%s: pump/drainer resources not updated: %s", namespace, name, e)
    storage = await _pump_storage(ctx, name, namespace, spec.tls_secret, seen.pump_replicas)
    if storage is not None:
        patch.status["pumpStorage"] = pumpstorage.entries(storage)
    await ctx.report(
        namespace,
        name,
        Change("Ready", ready, "AllOnline" if ready else "NotAllOnline", why),
        *(pumpstorage.conditions(storage) if storage is not None else ()),
    )


async def _pump_storage(
    ctx: Context, name: str, namespace: str, tls_secret: str | None, replicas: int
) -> list[pumpstorage.PumpStorage] | None:
    """Each pump's claim and stop-write samples (None: the claims or the TLS Secret could
    not be read; logged)."""
    try:
        tls = await context_for(ctx.kube, namespace, tls_secret) if tls_secret else None
        return await pumpstorage.read(
            ctx.kube, ctx.http, _ADDRESSES, namespace, name, replicas, tls
        )
    except (KubeError, ScaleDownError) as e:
        log.warning("%s/%s: pump storage not read: %s", namespace, name, e)
        return None
