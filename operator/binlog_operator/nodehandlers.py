"""kopf handlers for Pump and Drainer resources: thin, over ``Reconciler`` and ``NodeResources``.

A Drainer (owned by its cluster or on its own) runs as its spec says; a problem marks that
Drainer (condition ``Degraded`` with the reason, ``status.lastError``, a Warning event), never
its cluster. Deleting a Drainer closes its drainer through its HTTP API and waits for
``offline`` in the registry before its objects and volume claim go; a Drainer still listed in
its cluster's ``spec.drainers`` is not closed: its deletion waits (Terminating) until the entry
is removed, since the cluster's spec would bring it back. Deleting a Pump is a scale-down's
business: a Pump whose ordinal the cluster still wants is refused the same way (it stays
Terminating, its pump keeps running, a Warning event says how to scale), and one above the
wanted count is closed and waited for. When the cluster is gone or being deleted, its deletion
has closed the nodes, and the resources just go.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NoReturn

import kopf

from binlog_operator import (
    DRAINER_KIND,
    DRAINER_PLURAL,
    GROUP,
    KIND,
    PUMP_KIND,
    PUMP_PLURAL,
    VERSION,
)
from binlog_operator.context import Context
from binlog_operator.kube import API_VERSION, KubeError
from binlog_operator.noderes import DrainerProblem
from binlog_operator.nodes import drainer_of, owned_by
from binlog_operator.scaledown import ScaleDownError
from binlog_operator.spec import SpecError

log = logging.getLogger(__name__)
DRAINERS = (GROUP, VERSION, DRAINER_PLURAL)
PUMPS = (GROUP, VERSION, PUMP_PLURAL)


async def _cluster(ctx: Context, namespace: str, name: str) -> Mapping[str, Any] | None:
    try:
        return await ctx.kube.get(API_VERSION, KIND, namespace, name)
    except KubeError as e:
        raise kopf.TemporaryError(str(e), delay=ctx.options.retry_delay) from e


def _going(cluster: Mapping[str, Any] | None) -> bool:
    return cluster is None or "deletionTimestamp" in cluster["metadata"]


async def _fail(
    ctx: Context, kind: str, body: kopf.Body, problem: DrainerProblem, warn: bool = True
) -> NoReturn:
    """Mark the resource, post a Warning event (when ``warn``) and raise for kopf."""
    md = body["metadata"]
    await ctx.report_node(kind, md["namespace"], md["name"], problem)
    if warn:
        kopf.warn(body, reason=problem.reason, message=problem.message[:1000])
    if problem.permanent:
        raise kopf.PermanentError(problem.message)
    raise kopf.TemporaryError(problem.message, delay=ctx.options.retry_delay)


@kopf.on.create(*DRAINERS)
@kopf.on.update(*DRAINERS)
@kopf.on.resume(*DRAINERS)
async def run_drainer(
    body: kopf.Body, name: str, namespace: str | None, memo: kopf.Memo, **_: Any
) -> None:
    ctx: Context = memo.ctx
    assert namespace is not None
    cluster_name, _drainer = drainer_of(body)
    cluster = await _cluster(ctx, namespace, cluster_name)
    if cluster is not None and "deletionTimestamp" in cluster["metadata"]:
        return
    problem: DrainerProblem | None
    if cluster is None:
        message = f"BinlogCluster {cluster_name!r} not found in namespace {namespace}"
        problem = DrainerProblem("ClusterNotFound", message, permanent=False)
    else:
        try:
            spec, entries = ctx.reconciler.parse_with_entries(cluster["spec"])
        except SpecError as e:
            message = f"BinlogCluster {cluster_name} has an invalid spec: {e}"
            problem = DrainerProblem("ClusterInvalid", message, permanent=False)
        else:
            names = {str(e["name"]) for e in entries}
            uid = cluster["metadata"]["uid"]
            try:
                async with ctx.lock(namespace, cluster_name):  # its partition vs the roll's
                    problem = await ctx.reconciler.nodes.run_drainer(
                        cluster_name, namespace, uid, spec, names, body
                    )
            except KubeError as e:
                problem = DrainerProblem("ApiError", str(e)[:500], permanent=False)
    if problem is not None:
        await _fail(ctx, DRAINER_KIND, body, problem)
    await ctx.report_node(DRAINER_KIND, namespace, name, None)


@kopf.on.delete(*DRAINERS)
async def close_drainer(
    body: kopf.Body, name: str, namespace: str | None, memo: kopf.Memo, retry: int, **_: Any
) -> None:
    ctx: Context = memo.ctx
    assert namespace is not None
    cluster_name, drainer = drainer_of(body)
    cluster = await _cluster(ctx, namespace, cluster_name)
    nodes = ctx.reconciler.nodes
    if cluster is None or "deletionTimestamp" in cluster["metadata"]:
        await _delete_objects(ctx, cluster_name, namespace, body)
        return
    try:
        spec, entries = ctx.reconciler.parse_with_entries(cluster["spec"])
    except SpecError as e:
        message = f"cannot close drainer {drainer}: BinlogCluster {cluster_name} is invalid: {e}"
        await _fail(ctx, DRAINER_KIND, body, DrainerProblem("ClusterInvalid", message, False))
    names = {str(e["name"]) for e in entries}
    if drainer in names:
        if not owned_by(body, cluster["metadata"]["uid"]):
            return  # the entry's own Drainer runs that drainer; this one never ran anything
        message = (
            f"drainer {drainer} is in spec.drainers of BinlogCluster {cluster_name}: remove it "
            "there and the operator closes it and deletes this Drainer; until then it keeps "
            "running and this Drainer stays"
        )
        problem = DrainerProblem("DeletionRefused", message, permanent=False)
        await _fail(ctx, DRAINER_KIND, body, problem, warn=retry == 0)
    if not await nodes.runs_it(cluster_name, namespace, body):
        return  # another Drainer runs that name: nothing of this one's to close
    try:
        await ctx.reconciler.close_drainer(cluster_name, namespace, spec, drainer)
    except (ScaleDownError, KubeError) as e:
        message = f"drainer {drainer} not closed, its objects are kept: {e}"
        await _fail(ctx, DRAINER_KIND, body, DrainerProblem("OfflineFailed", message, False))
    await _delete_objects(ctx, cluster_name, namespace, body)
    kopf.info(body, reason="DrainerRemoved", message=f"drainer {drainer} offline and deleted")


async def _delete_objects(ctx: Context, cluster: str, namespace: str, body: kopf.Body) -> None:
    try:
        await ctx.reconciler.nodes.delete_objects(cluster, namespace, body)
    except KubeError as e:
        raise kopf.TemporaryError(str(e), delay=ctx.options.retry_delay) from e


@kopf.on.delete(*PUMPS)
async def close_pump(
    body: kopf.Body, name: str, namespace: str | None, memo: kopf.Memo, retry: int, **_: Any
) -> None:
    ctx: Context = memo.ctx
    assert namespace is not None
    cluster_name = str((body.get("spec") or {}).get("cluster", ""))
    cluster = await _cluster(ctx, namespace, cluster_name)
    if _going(cluster):
        return
    assert cluster is not None
    try:
        spec = ctx.reconciler.parse(cluster["spec"])
    except SpecError as e:
        message = f"cannot close pump {name}: BinlogCluster {cluster_name} is invalid: {e}"
        await _fail(ctx, PUMP_KIND, body, DrainerProblem("ClusterInvalid", message, False))
    ordinal = int((body.get("spec") or {}).get("ordinal", 0))
    wanted = spec.pumps.replicas
    if ordinal < wanted:
        message = (
            f"pump {name} is one of the {wanted} pumps of BinlogCluster {cluster_name}: pumps "
            f"leave by a scale-down (kubectl scale bc/{cluster_name} --replicas=N), which takes "
            "the highest ordinals offline first; until its ordinal is scaled away this Pump "
            "stays (Terminating) and its pump keeps running"
        )
        problem = DrainerProblem("DeletionRefused", message, permanent=False)
        await _fail(ctx, PUMP_KIND, body, problem, warn=retry == 0)
    try:
        await ctx.reconciler.close_pump(cluster_name, namespace, spec, name)
    except (ScaleDownError, KubeError) as e:
        message = f"pump {name} not offline yet: {e}"
        await _fail(ctx, PUMP_KIND, body, DrainerProblem("OfflineFailed", message, False))
