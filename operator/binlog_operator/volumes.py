"""Growing a StatefulSet's volumes: what an edit of its claim templates asks for (pure), and the
way it is done, since a StatefulSet's ``volumeClaimTemplates`` cannot change.

A larger ``storage.size`` (same claims, same class) is applied in three steps: every existing
claim of the set gets the new request (``spec.resources.requests.storage``; the API server
accepts it only when the claim's StorageClass has ``allowVolumeExpansion``, and the class's
provisioner then grows the volume), the StatefulSet is deleted with ``propagationPolicy:
Orphan`` (its pods, their claims and its ControllerRevisions stay), and the caller applies it
again with the new claim templates. The new set adopts the running pods; their template is
unchanged, so its revision is theirs and no pod is replaced: each pump keeps its pod, its volume
and its binlogs. A smaller size, another class, or claims added or removed are refused.

Invariants: the StatefulSet is deleted only after every claim took the new request (a claim
refused leaves the set as it was, with the API server's reason in the refusal); and the set is
applied again only once it is gone (``wait_gone``), so an apply never lands on the terminating
one.

Worked example: ``pumps.storage.size`` 1Gi -> 2Gi on a set of 2 replicas: ``data-c-pump-0`` and
``data-c-pump-1`` get ``requests.storage: 2Gi``; ``c-pump`` is deleted (orphan) and re-created
with a 2Gi template; ``c-pump-0``/``-1`` keep their UIDs. Where the volumes cannot really grow
(a hostPath or local volume), each claim's ``status.capacity`` stays 1Gi and the cluster's
status says so (``pumpstorage``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from binlog_operator.kube import KubeClient, KubeError

log = logging.getLogger(__name__)
Obj = dict[str, Any]

_UNITS = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}  # fmt: skip
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kMGTPE]i?)?\s*$")


def quantity_bytes(text: object) -> int | None:
    """A Kubernetes storage quantity (``10Gi``, ``500M``, ``1073741824``) in bytes; None if it
    is not one (milli-units and exponents are not storage sizes)."""
    m = _QUANTITY.match(str(text)) if text is not None else None
    if m is None:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""])


@dataclass(frozen=True)
class Plan:
    """What an edit of a set's claim templates asks: ``grow`` is {claim template: new size}
    (empty: nothing to do), ``refused`` why it cannot be done (None: it can)."""

    grow: dict[str, str] = field(default_factory=dict)
    refused: str | None = None


def _claims(templates: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str | None, str | None]]:
    """{claim name: (size, storageClassName)}."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for c in templates:
        spec = c.get("spec") or {}
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        out[str(c["metadata"]["name"])] = (size, spec.get("storageClassName") or None)
    return out


def _shown(claims: Mapping[str, tuple[str | None, str | None]]) -> str:
    parts = [f"{n}: {s}" + (f" ({c})" if c else "") for n, (s, c) in claims.items()]
    return ", ".join(parts) or "none"


def plan(name: str, live: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]) -> Plan:
    """What changing set ``name``'s claim templates from ``live`` to ``wanted`` takes."""
    running, asked = _claims(live), _claims(wanted)
    if running == asked:
        return Plan()
    keeping = f"keeping {_shown(running)}, not {_shown(asked)}"
    if running.keys() != asked.keys():
        return Plan(refused=f"{name}: volumes cannot be added or removed in place: {keeping}")
    grow: dict[str, str] = {}
    for claim, (size, cls) in asked.items():
        old_size, old_cls = running[claim]
        if cls != old_cls:
            return Plan(
                refused=f"{name}: a volume's storage class cannot change in place: {keeping}"
            )
        old_bytes, new_bytes = quantity_bytes(old_size), quantity_bytes(size)
        if old_bytes is None or new_bytes is None:
            return Plan(refused=f"{name}: a volume size is not a quantity: {keeping}")
        if new_bytes < old_bytes:
            return Plan(
                refused=f"{name}: a volume cannot shrink ({claim}: {old_size} -> {size}): "
                f"{keeping}. Put back {old_size} or more"
            )
        if new_bytes > old_bytes:
            grow[claim] = str(size)
    return Plan(grow=grow)


def claim_names(sts: Mapping[str, Any], claim: str) -> list[str]:
    """The claims of template ``claim`` for the set's current ordinals (``<claim>-<set>-<i>``)."""
    name, replicas = sts["metadata"]["name"], int(sts["spec"].get("replicas", 1))
    return [f"{claim}-{name}-{i}" for i in range(replicas)]


async def expand_claims(kube: KubeClient, live: Mapping[str, Any], grow: Mapping[str, str]) -> None:
    """Give every existing claim of ``live`` (a StatefulSet) its new request; KubeError when the
    API server refuses one (a class without ``allowVolumeExpansion``, an unbound claim)."""
    ns = live["metadata"]["namespace"]
    for claim, size in grow.items():
        for pvc_name in claim_names(live, claim):
            pvc = await kube.get("v1", "PersistentVolumeClaim", ns, pvc_name)
            if pvc is None:
                continue  # its pod has not made it yet: the new template will
            current = ((pvc["spec"].get("resources") or {}).get("requests") or {}).get("storage")
            if (quantity_bytes(current) or 0) >= (quantity_bytes(size) or 0):
                continue
            changes = {"spec": {"resources": {"requests": {"storage": size}}}}
            version = str(pvc["metadata"]["resourceVersion"])
            await kube.patch("v1", "PersistentVolumeClaim", ns, pvc_name, version, changes)
            log.info("%s/%s: volume request %s -> %s", ns, pvc_name, current, size)


async def wait_gone(
    kube: KubeClient, namespace: str, name: str, within: float = 60.0, every: float = 0.5
) -> None:
    """Until StatefulSet ``name`` no longer exists (its orphaning delete done); a retriable
    KubeError after ``within`` seconds."""
    deadline = time.monotonic() + within
    while await kube.get("apps/v1", "StatefulSet", namespace, name) is not None:
        if time.monotonic() > deadline:
            raise KubeError(f"{namespace}/{name}: StatefulSet still being deleted after {within} s")
        await asyncio.sleep(every)


async def grow(kube: KubeClient, live: Mapping[str, Any], sizes: Mapping[str, str]) -> str | None:
    """Expand the claims and delete the set, orphaning its pods; why not (the set is then left
    as it was), or None: the caller applies the set with its new claim templates."""
    md = live["metadata"]
    try:
        await expand_claims(kube, live, sizes)
    except KubeError as e:
        if e.retriable:
            raise
        return (
            f"{md['name']}: the volumes cannot grow to "
            f"{', '.join(f'{c}: {s}' for c, s in sizes.items())}: the API server refused a "
            f"claim (its StorageClass must allow volume expansion): {e}"
        )
    await kube.delete("apps/v1", "StatefulSet", md["namespace"], md["name"], propagation="Orphan")
    await wait_gone(kube, md["namespace"], md["name"])
    log.info(
        "%s/%s: StatefulSet re-created for volumes %s (pods kept)",
        md["namespace"],
        md["name"],
        dict(sizes),
    )
    return None
