"""Finding and deleting the objects of drainers that left a BinlogCluster's spec.

A drainer's StatefulSet, Service and ConfigMap are labelled
``app.kubernetes.io/instance=<cluster>``, ``app.kubernetes.io/component=drainer`` and
``binlog.io/drainer=<name>`` and owned by the BinlogCluster. ``stale_drainers`` names the
drainers that have such an object owned by this BinlogCluster (its uid) but are no longer in
the spec. The caller takes each one offline before
``delete_drainer`` removes its objects (a drainer that vanishes while registered ``online``
blocks every pump's offline forever: a pump waits for all non-offline drainers).

The data volume claim (``data-<statefulset>-0``) is deleted too: it holds only the drainer's
checkpoint, which is meaningless once the drainer is offline (pumps garbage-collect what it did
not consume). A drainer added again under the same name starts afresh, like a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import Any

from binlog_operator.configs import drainer_name
from binlog_operator.kube import KubeClient
from binlog_operator.manifests import labels

LABEL = "binlog.io/drainer"
KINDS = (("apps/v1", "StatefulSet"), ("v1", "Service"), ("v1", "ConfigMap"))


def selector(cluster: str) -> str:
    lbl = labels(cluster, "drainer")
    keys = ("app.kubernetes.io/instance", "app.kubernetes.io/component")
    return ",".join(f"{k}={lbl[k]}" for k in keys)


def drainer_pod(cluster: str, drainer: str) -> str:
    """A drainer's only pod, which is also its node id."""
    return f"{drainer_name(cluster, drainer)}-0"


def stale_names(objects: Iterable[Mapping[str, Any]], uid: str, wanted: Set[str]) -> list[str]:
    """Drainer names of ``objects`` owned by ``uid`` and not in ``wanted``, sorted."""
    found: set[str] = set()
    for obj in objects:
        md = obj.get("metadata") or {}
        name = (md.get("labels") or {}).get(LABEL)
        owners = md.get("ownerReferences") or []
        if name and name not in wanted and any(o.get("uid") == uid for o in owners):
            found.add(name)
    return sorted(found)


async def stale_drainers(
    kube: KubeClient, cluster: str, namespace: str, uid: str, wanted: Set[str]
) -> list[str]:
    objects: list[dict[str, Any]] = []
    for api_version, kind in KINDS:
        objects += await kube.list_labelled(api_version, kind, namespace, selector(cluster))
    return stale_names(objects, uid, wanted)


async def delete_drainer(kube: KubeClient, cluster: str, namespace: str, drainer: str) -> None:
    """Delete the drainer's StatefulSet first (its pod goes), then Service, ConfigMap and the
    data volume claim; each is skipped if already gone."""
    name = drainer_name(cluster, drainer)
    for api_version, kind in KINDS:
        await kube.delete(api_version, kind, namespace, name)
    await kube.delete("v1", "PersistentVolumeClaim", namespace, f"data-{name}-0")
