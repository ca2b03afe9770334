"""Each pump's storage as the BinlogCluster shows it: its volume claim (requested and real
capacity) and its free space against its stop-write floor (from the pump's ``/metrics``).

``read`` looks (I/O: the claims through the API, the metrics over HTTP(S) at the pod's address);
the rest is pure. Invariants: a pump is reported at its floor only from its own samples
(``binlog_pump_storage_stop_write`` 1: free space at or below
``stop-write-at-available-space``, prewrites refused), never guessed; a pump whose metrics
cannot be read is shown with the error and counts as neither; a claim whose capacity is below
its request (a grow its provisioner has not done, or cannot do: hostPath and local volumes)
is reported as such, never as grown.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from binlog_operator.conditions import Change
from binlog_operator.configs import PUMP_HTTP_PORT
from binlog_operator.kube import KubeClient
from binlog_operator.manifests import pump_name, pump_pod
from binlog_operator.pumps import PodAddresses
from binlog_operator.scaledown import ScaleDownError
from binlog_operator.volumes import quantity_bytes

STORAGE_FULL = "PumpStorageFull"
RESIZE_PENDING = "VolumeResizePending"
_STOP_WRITE = "binlog_pump_storage_stop_write"
_FLOOR = "binlog_pump_storage_stop_write_at_available_space_bytes"
_SIZE = "binlog_pump_storage_storage_size_bytes"


@dataclass(frozen=True)
class PumpStorage:
    pod: str
    claim: str
    requested: str | None = None  # the claim's spec.resources.requests.storage
    capacity: str | None = None  # its status.capacity.storage (None: not bound)
    available: int | None = None  # bytes free, as the pump last measured
    floor: int | None = None  # its stop-write-at-available-space
    stop_write: bool | None = None  # None: metrics not read
    error: str | None = None

    @property
    def resize_pending(self) -> bool:
        asked, has = quantity_bytes(self.requested), quantity_bytes(self.capacity)
        return asked is not None and has is not None and has < asked


def samples(text: str) -> tuple[bool | None, int | None, int | None]:
    """(at the floor, available bytes, the floor) from a pump's exposition; None where absent."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in (_STOP_WRITE, _FLOOR):
                found[s.name] = s.value
            elif s.name == _SIZE and s.labels.get("type") == "available":
                found[_SIZE] = s.value
    stop = found.get(_STOP_WRITE)
    available, floor = found.get(_SIZE), found.get(_FLOOR)
    return (
        None if stop is None else stop > 0,
        None if available is None else int(available),
        None if floor is None else int(floor),
    )


async def read(
    kube: KubeClient,
    http: aiohttp.ClientSession,
    addresses: PodAddresses,
    namespace: str,
    cluster: str,
    replicas: int,
    tls: ssl.SSLContext | None = None,
) -> list[PumpStorage]:
    """Each pump ordinal's claim and samples; raises KubeError (the claims)."""
    out = []
    for i in range(replicas):
        pod, claim = pump_pod(cluster, i), f"data-{pump_pod(cluster, i)}"
        pvc = await kube.get("v1", "PersistentVolumeClaim", namespace, claim) or {}
        requested = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get(
            "storage"
        )
        capacity = ((pvc.get("status") or {}).get("capacity") or {}).get("storage")
        try:
            where = addresses.address(namespace, pump_name(cluster), pod, PUMP_HTTP_PORT)
            url = f"{'https' if tls else 'http'}://{where}/metrics"
            async with http.get(url, ssl=tls or True, timeout=aiohttp.ClientTimeout(total=5)) as r:
                r.raise_for_status()
                stop, available, floor = samples(await r.text())
        except (aiohttp.ClientError, TimeoutError, ScaleDownError, ValueError) as e:
            out.append(PumpStorage(pod, claim, requested, capacity, error=repr(e)[:200]))
            continue
        out.append(PumpStorage(pod, claim, requested, capacity, available, floor, stop))
    return out


def entries(pumps: Sequence[PumpStorage]) -> list[dict[str, Any]]:
    """``status.pumpStorage``."""
    out = []
    for p in pumps:
        entry: dict[str, Any] = {"pod": p.pod, "claim": p.claim}
        for key, value in (
            ("requested", p.requested),
            ("capacity", p.capacity),
            ("availableBytes", p.available),
            ("stopWriteAtAvailableSpace", p.floor),
            ("stopWrite", p.stop_write),
            ("error", p.error),
        ):
            if value is not None:
                entry[key] = value
        out.append(entry)
    return out


def conditions(pumps: Sequence[PumpStorage]) -> tuple[Change, Change]:
    """``PumpStorageFull`` (pumps at their stop-write floor) and ``VolumeResizePending``
    (claims whose capacity is below their request)."""
    full = [p for p in pumps if p.stop_write]
    if full:
        message = "; ".join(
            f"{p.pod}: {p.available} bytes free <= stop-write-at-available-space {p.floor}: "
            "prewrites refused"
            for p in full
        )
        full_change = Change(STORAGE_FULL, True, "StopWriteFloor", message)
    else:
        unread = [p.pod for p in pumps if p.stop_write is None]
        message = "every pump above its stop-write floor" + (
            f" (metrics not read: {', '.join(unread)})" if unread else ""
        )
        full_change = Change(STORAGE_FULL, False, "AboveFloor", message)
    pending = [p for p in pumps if p.resize_pending]
    if pending:
        message = "; ".join(
            f"{p.claim}: requested {p.requested}, capacity {p.capacity}" for p in pending
        )
        resize = Change(
            RESIZE_PENDING,
            True,
            "CapacityBelowRequest",
            f"{message} (the volume has not grown: its provisioner expands it, or cannot)",
        )
    else:
        resize = Change(RESIZE_PENDING, False, "CapacityMeetsRequest")
    return full_change, resize
