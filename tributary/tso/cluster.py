"""Which clock a deployment runs on: PD's (PD mode) or our own TSO (standalone mode).

PD mode: the ``pd-urls`` answer ``pdpb.PD/GetMembers`` (they are PD's client URLs), or the
etcd behind them holds PD's ``/pd/cluster_id`` (PD is down for the moment: waiting for it is
right, starting a second clock beside it is not). The cluster ID is PD's and every timestamp
comes from PD's ``Tso`` stream. Standalone mode: our cluster ID at
``/tidb-binlog/v1/cluster_id`` and our TSO members' timestamps.

Invariant: in PD mode nothing here writes a cluster ID or elects a TSO; a deployment never
gets two clocks.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass

from tributary.coord.cluster_id import ensure_cluster_id, read_cluster_id
from tributary.coord.kv import Kv
from tributary.tso.client import TsoClient
from tributary.tso.member import TsoMember
from tributary.tso.pd_client import PdClient, probe_pd

PD_CLUSTER_ID_KEY = b"/pd/cluster_id"  # 8 bytes, big-endian, written by PD


@dataclass(frozen=True, slots=True)
class ClusterClock:
    cluster_id: int | None  # None: standalone and no ID created yet (``create=False``)
    pd: bool  # True: PD mode
    pd_urls: tuple[str, ...]

    def tso(
        self,
        kv: Kv,
        *,
        member: TsoMember | None = None,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> TsoClient | PdClient:
        """The ``Tso`` port of this deployment (an async context manager)."""
        if self.cluster_id is None:
            raise ValueError("no cluster ID: no pump or TSO has run against this etcd")
        if self.pd:
            return PdClient(self.pd_urls, self.cluster_id, timeout=timeout, ssl_context=ssl_context)
        return TsoClient(
            kv, self.cluster_id, member=member, timeout=timeout, ssl_context=ssl_context
        )


async def pd_cluster_id(kv: Kv) -> int | None:
    """PD's cluster ID as PD keeps it in its etcd, or None outside a PD cluster."""
    found = await kv.get(PD_CLUSTER_ID_KEY)
    if found is None or len(found.value) != 8:
        return None
    return int.from_bytes(found.value, "big") or None


async def discover(
    kv: Kv,
    pd_urls: Sequence[str],
    *,
    create: bool = False,
    ssl_context: ssl.SSLContext | None = None,
) -> ClusterClock:
    """PD mode if PD answers (or left its cluster ID in etcd); standalone otherwise.

    ``create``: in standalone mode, create our cluster ID if there is none yet (pumps, TSO,
    drainer do; tools only read it).
    """
    urls = tuple(pd_urls)
    cluster_id = await probe_pd(urls, ssl_context=ssl_context)
    if cluster_id is None:
        cluster_id = await pd_cluster_id(kv)
    if cluster_id is not None:
        return ClusterClock(cluster_id, True, urls)
    own = await ensure_cluster_id(kv) if create else await read_cluster_id(kv)
    return ClusterClock(own, False, urls)
