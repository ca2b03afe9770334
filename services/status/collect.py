"""One sample of the whole cluster: the registry, each node's HTTP API, the capture keys.

A pump's or drainer's HTTP API is on its registered address (gRPC and HTTP share the port, as
in tidb-binlog, and as binlogctl reaches it). A node
that does not answer within the timeout is shown from its registry record alone, with the
error; it never stops the sample. Capture clusters are found under ``/tidb/cdc/`` unless the
settings name them.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from services.status.view import Rates, lag_seconds, owner_of, ts_time
from tributary.cdc.errors import BadRecord
from tributary.cdc.keys import ROOT as CDC_ROOT
from tributary.cdc.keys import FeedId, KeyKind, Keys
from tributary.cdc.model import CaptureInfo, ChangeFeedInfo, ChangeFeedStatus
from tributary.coord.kv import Kv
from tributary.net import join_host_port, split_host_port
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeStatus
from tributary.sinks.urls import redact

log = logging.getLogger(__name__)

PUMP_METRICS = {
    "binlog_pump_binlogs_written": "written",
    "binlog_pump_storage_storage_size_bytes": "disk",
}
DRAINER_METRICS = {
    "binlog_drainer_applied_binlog_count": "applied",
    "binlog_drainer_checkpoint_delay_seconds": "delay",
}


def http_address(node: NodeStatus) -> str:
    """The node's HTTP API: its registered address (one port serves gRPC and HTTP)."""
    host, port = split_host_port(node.addr)
    return join_host_port(host, port)


@dataclass
class NodeAnswer:
    status: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""


class Collector:
    """Reads one sample; keeps the previous counters to turn them into rates."""

    def __init__(
        self,
        kv: Kv,
        http: aiohttp.ClientSession,
        *,
        cdc_clusters: tuple[str, ...] = (),
        timeout: float = 2.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._kv = kv
        self._registry = NodeRegistry(kv)
        self._http = http
        self._clusters = cdc_clusters
        self._timeout = timeout
        self._tls = tls
        self._rates = Rates()

    async def sample(self) -> dict[str, Any]:
        pumps, drainers = await asyncio.gather(
            self._registry.list(NodeKind.PUMP), self._registry.list(NodeKind.DRAINER)
        )
        answers = await asyncio.gather(
            *(self._ask(n, PUMP_METRICS) for n in pumps),
            *(self._ask(n, DRAINER_METRICS) for n in drainers),
        )
        now = time.time()
        cdc = await self._cdc(now)
        return {
            "time": now,
            "pumps": [
                self._pump(n, a, now) for n, a in zip(pumps, answers[: len(pumps)], strict=True)
            ],
            "drainers": [
                self._drainer(n, a, now)
                for n, a in zip(drainers, answers[len(pumps) :], strict=True)
            ],
            "cdc": cdc,
        }

    def _pump(self, node: NodeStatus, answer: NodeAnswer, now: float) -> dict[str, Any]:
        rate = self._rates.update(f"pump/{node.node_id}", answer.metrics.get("written"), now)
        return {
            **_node(node),
            "max_commit_ts": node.max_commit_ts,
            "max_commit_time": ts_time(node.max_commit_ts),
            "disk_available_bytes": answer.metrics.get("disk"),
            "write_rate": rate,
            "error": answer.error,
        }

    def _drainer(self, node: NodeStatus, answer: NodeAnswer, now: float) -> dict[str, Any]:
        checkpoint = int(answer.status.get("LastTS") or node.max_commit_ts)
        rate = self._rates.update(f"drainer/{node.node_id}", answer.metrics.get("applied"), now)
        return {
            **_node(node),
            "checkpoint_ts": checkpoint,
            "checkpoint_time": ts_time(checkpoint),
            "lag_seconds": lag_seconds(checkpoint, now),
            "apply_rate": rate,
            "synced": answer.status.get("Synced"),
            "sink": answer.status.get("Sink"),
            "pump_positions": answer.status.get("PumpPos") or {},
            "catchup": answer.status.get("CatchUp"),
            "error": answer.error,
        }

    async def _ask(self, node: NodeStatus, wanted: dict[str, str]) -> NodeAnswer:
        answer = NodeAnswer()
        # by state, not isAlive: a paused or offline node has stopped serving; tidb-binlog's
        # running pumps and drainers record isAlive false (node.NewStatus leaves it unset)
        if node.state.value in ("paused", "offline"):
            return answer
        try:
            base = f"{'https' if self._tls else 'http'}://{http_address(node)}"
            async with asyncio.timeout(self._timeout):
                answer.status = await self._get_json(f"{base}/status")
                answer.metrics = _pick(await self._get_text(f"{base}/metrics"), wanted)
        except (OSError, aiohttp.ClientError, TimeoutError, ValueError) as e:
            answer.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return answer

    async def _get_json(self, url: str) -> dict[str, Any]:
        async with self._http.get(url, ssl=self._tls or True) as r:
            r.raise_for_status()
            doc = await r.json(content_type=None)
        return doc if isinstance(doc, dict) else {}

    async def _get_text(self, url: str) -> str:
        async with self._http.get(url, ssl=self._tls or True) as r:
            r.raise_for_status()
            return await r.text()

    async def _cdc(self, now: float) -> list[dict[str, Any]]:
        items = await self._kv.get_prefix(f"{CDC_ROOT}/".encode())
        clusters = self._clusters or tuple(
            sorted({k.key.decode(errors="replace").split("/")[3] for k in items})
        )
        return [_cluster(Keys(c), items, now) for c in clusters]


def _node(node: NodeStatus) -> dict[str, Any]:
    return {
        "id": node.node_id,
        "addr": node.addr,
        "state": node.state.value,
        "alive": node.is_alive,
        "update_time": ts_time(node.update_ts),
    }


def _pick(text: str, wanted: dict[str, str]) -> dict[str, float]:
    """The wanted samples of an exposition, summed over labels except ``type="available"``
    for sizes (the only label the disk figure is read with)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = wanted.get(s.name)
            if key is None or s.labels.get("type", "available") != "available":
                continue
            out[key] = out.get(key, 0.0) + s.value
    return out


def _cluster(keys: Keys, items: list[Any], now: float) -> dict[str, Any]:
    captures: list[dict[str, Any]] = []
    owners: dict[bytes, tuple[int, str]] = {}
    infos: dict[FeedId, ChangeFeedInfo] = {}
    statuses: dict[FeedId, ChangeFeedStatus] = {}
    for item in items:
        parsed = keys.parse(item.key)
        if parsed is None:
            continue
        try:
            if parsed.kind is KeyKind.CAPTURE:
                c = CaptureInfo.from_json(item.value)
                captures.append(
                    {
                        "id": c.id,
                        "address": c.address,
                        "version": c.version,
                        "start_time": c.start_timestamp or None,
                    }
                )
            elif parsed.kind is KeyKind.OWNER:
                owners[item.key] = (item.create_revision, item.value.decode(errors="replace"))
            elif parsed.kind is KeyKind.INFO and parsed.feed is not None:
                infos[parsed.feed] = ChangeFeedInfo.from_json(item.value)
            elif parsed.kind is KeyKind.STATUS and parsed.feed is not None:
                statuses[parsed.feed] = ChangeFeedStatus.from_json(item.value)
        except BadRecord as e:  # a foreign or corrupt record is shown as absent, never fatal
            log.warning("skipping unreadable capture record %r: %s", item.key, e)
    owner = owner_of(owners)
    for shown in captures:
        shown["is_owner"] = shown["id"] == owner
    return {
        "cluster": keys.cluster,
        "owner": owner,
        "captures": captures,
        "changefeeds": [_feed(f, infos[f], statuses.get(f), now) for f in sorted(infos, key=str)],
    }


def _feed(
    feed: FeedId, info: ChangeFeedInfo, status: ChangeFeedStatus | None, now: float
) -> dict[str, Any]:
    checkpoint = status.checkpoint_ts if status is not None else 0
    return {
        "namespace": feed.namespace,
        "id": feed.id,
        "state": info.state.value,
        "sink_uri": redact(info.sink_uri),
        "checkpoint_ts": checkpoint,
        "checkpoint_time": ts_time(checkpoint),
        "lag_seconds": lag_seconds(checkpoint, now),
        "error": info.error.message if info.error is not None else None,
    }
