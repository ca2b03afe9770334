"""Composition root of ``binlog-cdc server``: etcd, the upstream source, the capture, HTTP.

Start order: connect etcd -> build the source (``--upstream``) and the capture -> start
registration, processors and owner campaign in one TaskGroup -> serve the HTTP API (v2,
/metrics, /health, /ready) -> report ``Started`` (tests bind port 0). Stop (a signal): stop the
processors, resign ownership, revoke the registration, close HTTP, then cancel the loops.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass

from services.capture.capture import Capture
from services.capture.config import CaptureConfig
from services.capture.feeds import Feeds
from services.capture.fence import LeaseFence
from services.capture.http import routes
from services.capture.metrics import CaptureMetrics
from services.capture.processor import Processor, SinkOpener, SyncPointOpener
from services.capture.source import ChangeSource
from services.capture.spanbook import SpanMark
from services.capture.state import FeedView
from tributary.cdc.keys import Keys
from tributary.cdc.model import CaptureInfo
from tributary.cdc.spans import DDL_SPAN, WHOLE_SPAN
from tributary.coord.etcd import EtcdKv
from tributary.net import join_host_port, split_host_port
from tributary.sinks import Sink, SinkOptions
from tributary.sinks.pump.counters import KeyedPumpClientCounters, PumpClientCounters
from tributary.sinks.schemes import open_sink, open_sync_point_store
from tributary.telemetry.http import OpsServer
from tributary.telemetry.tls import ALPN_HTTP, server_context

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    capture_id: str
    http_port: int


def _mysql_source(uri: str, reader: str) -> tuple[ChangeSource, int]:
    from services.capture.mysql import MysqlChangeSource  # the binlog reader loads on demand

    source = MysqlChangeSource(uri, reader)
    return source, source.upstream_id


async def serve(
    cfg: CaptureConfig,
    stop: asyncio.Event,
    started: Callable[[Started], None] = lambda _: None,
    *,
    source: ChangeSource | None = None,
    sink_opener: SinkOpener = open_sink,
    sync_point_opener: SyncPointOpener = open_sync_point_store,
) -> None:
    """Run one capture until ``stop`` is set."""
    capture_id = cfg.capture_id or str(uuid.uuid4())
    keys = Keys(cfg.cluster_id)
    upstream_id = 0
    if source is None:
        source, upstream_id = _mysql_source(cfg.upstream, capture_id)
    host, port = split_host_port(cfg.listen.addr)
    async with AsyncExitStack() as stack:
        kv = await stack.enter_async_context(EtcdKv.connect(list(cfg.etcd)))
        feeds = Feeds(kv, keys, source, upstream_id)
        holder: list[Capture] = []
        pump_clients = KeyedPumpClientCounters()  # each changefeed's pump:// sinks count in its
        metrics = CaptureMetrics(
            lambda: holder[0] if holder else None, pump_client=pump_clients.totals
        )
        ops = OpsServer(
            host,
            port,
            routes(
                feeds, capture_id, cfg.cluster_id, lambda: bool(holder) and holder[0].is_owner()
            ),
            registry=metrics.registry,
            ready_fn=lambda: any(c.registered.is_set() for c in holder),
            ssl_context=server_context(cfg.security, alpn=ALPN_HTTP),
            allowed_cns=cfg.security.cert_allowed_cn,
        )
        http_port = await ops.start()
        stack.push_async_callback(ops.close)
        advertise = cfg.listen.advertise_addr or join_host_port(host, http_port)
        info = CaptureInfo(
            capture_id, advertise, deploy_path=os.getcwd(), start_timestamp=int(time.time())
        )

        fence = LeaseFence(cfg.capture_session_ttl)  # no sink write past it (``fence``)

        def make(view: FeedView, spans: Mapping[str, SpanMark]) -> Processor:
            assert view.info is not None and view.status is not None
            return Processor(
                cfg.cluster_id,
                advertise,
                view.feed,
                view.info,
                view.status,
                source,
                _counted(sink_opener, pump_clients.of((view.feed.namespace, view.feed.id))),
                spans=spans,
                tables=frozenset(s for s in view.assign if s not in (DDL_SPAN, WHOLE_SPAN)),
                gate=fence.check,
                sync_points=sync_point_opener,
            )

        capture = Capture(
            kv,
            keys,
            info,
            make,
            session_ttl=cfg.capture_session_ttl,
            owner_interval=cfg.owner_flush_interval,
            processor_interval=cfg.processor_flush_interval,
            checkpoint_interval=cfg.checkpoint_interval,
            fence=fence,
        )
        holder.append(capture)
        await _run(capture, stop, started, http_port)


def _counted(sink_opener: SinkOpener, pump_client: PumpClientCounters) -> SinkOpener:
    """``sink_opener`` giving every ``pump://`` sink the changefeed's pump client counters."""

    def open_(url: str, options: SinkOptions) -> AbstractAsyncContextManager[Sink]:
        return sink_opener(url, pump_client.options(url, options))

    return open_


async def _run(
    capture: Capture, stop: asyncio.Event, started: Callable[[Started], None], http_port: int
) -> None:
    async with asyncio.TaskGroup() as tg:
        loops = capture.start(tg)
        await capture.registered.wait()
        log.info("capture %s serving HTTP on port %d", capture.id, http_port)
        started(Started(capture.id, http_port))
        await stop.wait()
        log.info("capture %s stopping", capture.id)
        await capture.close()
        for task in loops:
            task.cancel()
