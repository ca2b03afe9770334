"""Sync point stores: where a changefeed records its sync points, in its downstream.

A sync point (``tributary.cdc.syncpoint``) says: when this row was written, the downstream
held exactly the upstream's transactions up to ``primary_ts``. The store writes it as TiCDC
does, into the downstream's ``tidb_cdc.syncpoint_v1`` (``sinks.mysql.syncpoint``), and deletes
the changefeed's rows older than the retention. Only SQL downstreams have one
(``SYNC_POINT_SCHEMES``; TiCDC refuses sync points for other sinks too);
``sinks.schemes.open_sync_point_store`` opens it by the sink URL.

The caller makes the moment: it writes only while nothing of the changefeed above the points is
applied and everything up to them is (``services.capture.processor``). The store asks its write
gate (the capture's lease fence) before it starts a write and before it commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tributary.sinks.port import WriteGate

SYNC_POINT_SCHEMES = frozenset({"mysql"})


@dataclass(frozen=True, slots=True)
class SyncPointOptions:
    cluster_id: str  # the capture cluster's id: TiCDC's ``ticdc_cluster_id`` column
    changefeed: str  # the changefeed's id: the ``changefeed`` column
    retention: float  # seconds a row is kept (``sync-point-retention``)


class SyncPointStore(Protocol):
    write_gate: WriteGate | None

    async def write(self, points: Sequence[int]) -> None:
        """One row per point (commit ts, ascending), with the downstream's snapshot id now, in
        one downstream transaction that also deletes the expired rows; a point already
        recorded is left as it is. SinkError (``retriable`` as the cause) on failure."""
        ...

    async def close(self) -> None: ...
