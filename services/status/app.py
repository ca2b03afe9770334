"""Composition root of the status page: etcd, an HTTP client, the sampler, the ops server.

Builds, in order: the etcd connection, the client session toward pumps and drainers, the
history ring and the page's HTTP server (``/`` the page, ``/api/cluster`` the last sample and
the history); then samples every ``sample-interval`` until ``stop``. Invariant: the API only
ever returns a complete sample (the sampler swaps it in whole), and a failed sample is logged
and retried at the next tick, never fatal: the page stays up while etcd is away.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from importlib import resources
from typing import Any

import aiohttp
from aiohttp import web

from services.status.collect import Collector
from services.status.config import StatusConfig
from services.status.history import History, Sample
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import KvError
from tributary.net import split_host_port
from tributary.servicekit.net import advertise_for
from tributary.telemetry.http import ApiError, OpsServer, json_response
from tributary.telemetry.tls import ALPN_HTTP, client_context, server_context

log = logging.getLogger(__name__)

PAGE_FILES = {
    "/": ("index.html", "text/html"),
    "/app.js": ("app.js", "text/javascript"),
    "/style.css": ("style.css", "text/css"),
}


@dataclass(frozen=True, slots=True)
class Started:
    """What a running status page tells its launcher (tests bind port 0)."""

    http_port: int
    url: str


class Board:
    """The last complete sample and the history of figures the charts draw."""

    def __init__(self, capacity: int) -> None:
        self.latest: dict[str, Any] | None = None
        self.history = History(capacity)

    def record(self, sample: dict[str, Any]) -> None:
        self.latest = sample
        self.history.add(Sample(sample["time"], _figures(sample)))

    def document(self) -> dict[str, Any]:
        if self.latest is None:
            raise ApiError(503, "no sample of the cluster yet")
        return {**self.latest, "history": self.history.to_dict()}


def _figures(sample: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in sample["drainers"]:
        if d["lag_seconds"] is not None:
            out[f"drainer/{d['id']}"] = d["lag_seconds"]
    for c in sample["cdc"]:
        for f in c["changefeeds"]:
            if f["lag_seconds"] is not None:
                out[f"changefeed/{c['cluster']}/{f['namespace']}/{f['id']}"] = f["lag_seconds"]
    return out


def page_routes(board: Board) -> web.RouteTableDef:
    r = web.RouteTableDef()
    page = resources.files("services.status") / "page"

    for path, (name, content_type) in PAGE_FILES.items():
        body = (page / name).read_bytes()

        async def serve_file(
            _: web.Request, body: bytes = body, content_type: str = content_type
        ) -> web.Response:
            return web.Response(
                body=body, content_type=content_type, headers={"Cache-Control": "no-cache"}
            )

        r.get(path)(serve_file)

    @r.get("/api/cluster")
    async def cluster(_: web.Request) -> web.Response:
        return json_response(board.document())

    return r


async def serve(
    cfg: StatusConfig, stop: asyncio.Event, started: Callable[[Started], None] = lambda _: None
) -> None:
    """Serve the page until ``stop`` is set."""
    capacity = max(1, math.ceil(cfg.history / cfg.sample_interval))
    board = Board(capacity)
    host, port = split_host_port(cfg.listen.addr)
    async with AsyncExitStack() as stack:
        kv = await stack.enter_async_context(EtcdKv.connect(list(cfg.pd_urls)))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        tls = client_context(cfg.security, alpn=ALPN_HTTP, check_hostname=False)
        collector = Collector(
            kv, http, cdc_clusters=cfg.cdc_clusters, timeout=cfg.node_timeout, tls=tls
        )
        ops = OpsServer(
            host,
            port,
            page_routes(board),
            ready_fn=lambda: board.latest is not None,
            ssl_context=server_context(cfg.security, alpn=ALPN_HTTP),
            allowed_cns=cfg.security.cert_allowed_cn,
        )
        bound = await ops.start()
        stack.push_async_callback(ops.close)
        scheme = "https" if cfg.security.tls_enabled else "http"
        url = f"{scheme}://{advertise_for(cfg.listen.addr, cfg.listen.advertise_addr, bound)}"
        log.info("status page at %s", url)
        started(Started(bound, url))
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(_sampler(collector, board, cfg.sample_interval, stop), name="sampler")


async def _sampler(
    collector: Collector, board: Board, interval: float, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        try:
            board.record(await collector.sample())
        except (KvError, OSError) as e:
            log.warning("cluster sample failed: %s", e)
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
