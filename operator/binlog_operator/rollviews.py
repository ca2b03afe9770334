"""A StatefulSet's side of a rolling update (pure; no I/O): the template hash and the partition
it is applied with, what ``rollout.plan`` reads from the live objects, and the image versions
the status shows.

Invariant (``with_rollout``): a StatefulSet whose pod template differs from the live one (its
``binlog.io/template-hash`` annotation) is applied with its partition at the replica count, so
no pod is replaced until the operator lowers it (``rollout``); an unchanged template keeps the
live partition, so applying never undoes the roll's progress nor starts it early. A new
StatefulSet starts at partition 0 (no pod to protect).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from binlog_operator.rollout import ORDER, PodView, SetView

Obj = dict[str, Any]
TEMPLATE_HASH = "binlog.io/template-hash"
REVISION_LABEL = "controller-revision-hash"
_COMPONENTS = {"pump": "pumps", "drainer": "drainers", "capture": "captures"}


def template_hash(sts: Obj) -> str:
    """A hash of the pod template as rendered (its config hash included)."""
    text = json.dumps(sts["spec"]["template"], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def partition_of(sts: Mapping[str, Any]) -> int:
    rolling = (sts.get("spec") or {}).get("updateStrategy", {}).get("rollingUpdate") or {}
    return int(rolling.get("partition") or 0)


def with_rollout(sts: Obj, live: Mapping[str, Any] | None) -> Obj:
    """``sts`` (about to be applied) with its template hash and its partition: the live one
    when the template is unchanged, the replica count (every pod held) when it changed, 0 for a
    new StatefulSet."""
    digest = template_hash(sts)
    sts["metadata"].setdefault("annotations", {})[TEMPLATE_HASH] = digest
    if live is None:
        partition = 0
    elif ((live.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_HASH) == digest:
        partition = partition_of(live)
    else:
        partition = int(sts["spec"]["replicas"])
    sts["spec"]["updateStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"partition": partition},
    }
    return sts


def component_of(obj: Mapping[str, Any]) -> str | None:
    """``pumps``, ``drainers`` or ``captures`` from the object's component label."""
    lbl = (obj.get("metadata") or {}).get("labels") or {}
    return _COMPONENTS.get(str(lbl.get("app.kubernetes.io/component", "")))


def set_view(sts: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> SetView:
    """The roll's view of a StatefulSet and its pods (pods named ``<sts>-<ordinal>``)."""
    md, status = sts["metadata"], sts.get("status") or {}
    name = str(md["name"])
    views: dict[int, PodView] = {}
    for pod in pods:
        view = pod_view(name, pod)
        if view is not None:
            views[view.ordinal] = view
    return SetView(
        name=name,
        component=component_of(sts) or "captures",
        replicas=int(sts["spec"].get("replicas", 1)),
        partition=partition_of(sts),
        observed=status.get("observedGeneration") == md.get("generation"),
        update_revision=str(status.get("updateRevision", "")),
        pods=views,
    )


def pod_view(sts: str, pod: Mapping[str, Any]) -> PodView | None:
    """The view of a pod of StatefulSet ``sts``; None for a pod not named ``<sts>-<n>``."""
    md, status = pod["metadata"], pod.get("status") or {}
    suffix = str(md["name"]).removeprefix(f"{sts}-")
    if suffix == md["name"] or not suffix.isdigit():
        return None
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return PodView(
        name=str(md["name"]),
        ordinal=int(suffix),
        revision=str((md.get("labels") or {}).get(REVISION_LABEL, "")),
        ready=ready,
        terminating="deletionTimestamp" in md,
        image=str(containers[0].get("image", "")),
    )


def version_of(image: str) -> str:
    """An image reference's version: its tag, or the start of its digest.

    >>> version_of("docker.io/library/tributary:0.1.0-next"), version_of("reg:5000/t")
    ('0.1.0-next', 'latest')
    """
    if "@" in image:
        return image.split("@", 1)[1].removeprefix("sha256:")[:12]
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


def versions(sets: Iterable[SetView]) -> dict[str, str | None]:
    """Per component, the versions its pods run (comma-separated while a roll mixes them);
    None for a component without pods (a merge patch removes it)."""
    found: dict[str, set[str]] = {}
    for s in sets:
        for pod in s.pods.values():
            if pod.image and pod.ordinal < s.replicas:
                found.setdefault(s.component, set()).add(version_of(pod.image))
    return {c: ",".join(sorted(found[c])) if c in found else None for c in ORDER}
