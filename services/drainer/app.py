"""Composition root of ``binlog-drainer``: builds every part in order, runs the
duties in one TaskGroup, and stops in two stages.

Start order: bind the gRPC socket (to learn the real port) -> node id and
data-dir lock -> etcd, cluster ID, registry -> DDL history and downstream ->
checkpoint (an ``initial-state`` export on its first start, else the
downstream's own, else the savepoint file, else ``initial-commit-ts``, -1
asking the TSO) -> merge, collector, syncer ->
first pump listing applied -> gRPC ``Cistern`` and HTTP servers -> register
online (heartbeat every second, ``maxCommitTS`` = saved checkpoint).

Stop (a signal, or ``PUT /state/{id}/pause|close``): stop serving Notify and
stop pulling (stage 1), let the syncer apply what was already merged (stage 2,
bounded by ``DRAIN_TIMEOUT``), save the checkpoint one last time (consistent
when everything merged was applied), then record ``paused`` or ``offline``
with that checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from grpclib.server import Server

from services.drainer import initial
from services.drainer.api import CisternApi
from services.drainer.backlog import PumpBacklog, grpc_asker
from services.drainer.catchup import CatchUp, CatchUpSettings
from services.drainer.catchup_job import job_spec
from services.drainer.checkpoint import FileCheckpoint, start_ts
from services.drainer.collector import Collector
from services.drainer.convert import Converter
from services.drainer.errors import DrainerError, SinkError
from services.drainer.feed import Inbox, MergeFeed
from services.drainer.http import routes
from services.drainer.item import PulledBinlogItem
from services.drainer.merge import Merger
from services.drainer.metrics import DrainerMetrics
from services.drainer.progress import Checkpointer
from services.drainer.puller import Puller, PullMetrics
from services.drainer.state import DrainerState
from services.drainer.syncer import Syncer
from tributary.config.drainer import DrainerConfig
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Kv, KvError
from tributary.ddlhistory import DdlHistory, KvDdlHistory, TidbHttpDdlHistory
from tributary.registry.heartbeat import Heartbeat
from tributary.registry.offline import check_marker, write_marker
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.servicekit.grpcserver import grpc_server
from tributary.servicekit.net import status_addr
from tributary.servicekit.node import claim_node
from tributary.servicekit.serving import serve_grpc_and_http
from tributary.sinks import Sink, SinkOptions, TimesQueries
from tributary.sinks import SinkError as DownstreamError
from tributary.sinks.pump.counters import PumpClientCounters
from tributary.sinks.schemes import open_sink
from tributary.sinks.urls import redact
from tributary.telemetry.grpcauth import enforce_allowed_cn
from tributary.telemetry.http import OpsServer
from tributary.telemetry.logs import ContextAdapter
from tributary.telemetry.tls import ALPN_HTTP, client_context, server_context
from tributary.tso.approach import ApproachTs
from tributary.tso.cluster import ClusterClock, discover
from tributary.tso.errors import TsoError
from tributary.wire.ts import from_seconds

log = logging.getLogger(__name__)

DRAIN_TIMEOUT = 10.0  # seconds the syncer gets at shutdown to apply what was merged
SHUTDOWN_GRACE = 5.0  # seconds gRPC handlers get to finish at exit


@dataclass(frozen=True)
class Started:
    """What a running drainer tells its launcher (tests bind port 0)."""

    node_id: str
    cluster_id: int
    grpc_port: int
    http_port: int
    advertise_addr: str
    start_ts: int  # the checkpoint it started after


async def current_tso(kv: Kv, clock: ClusterClock, tls: ssl.SSLContext | None = None) -> int:
    try:
        async with clock.tso(kv, ssl_context=tls) as tso:
            return await tso.get_ts()
    except TsoError as e:
        raise DrainerError(
            f"initial-commit-ts = -1 needs the current TSO timestamp, and none came: {e}",
            retriable=e.retriable,
        ) from e


class LatestTs:
    """PD mode: the drainer's latest ts, PD's last timestamp moved on by the time since
    (tidb-binlog's approach ts), asked of PD every ``interval`` seconds."""

    def __init__(
        self,
        kv: Kv,
        clock: ClusterClock,
        interval: float = 10.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._kv = kv
        self._clock = clock
        self._interval = interval
        self._tls = tls
        self._approach = ApproachTs()

    def approach(self) -> int:
        return self._approach.approach()

    async def run(self) -> None:
        async with self._clock.tso(self._kv, ssl_context=self._tls) as tso:
            while True:
                try:
                    self._approach.observe(await tso.get_ts())
                except TsoError as e:
                    log.warning("no timestamp from PD for the drainer's status: %s", e)
                await asyncio.sleep(self._interval)


@dataclass
class Drainer:
    """The parts of one running drainer, as built by :func:`serve`."""

    cfg: DrainerConfig
    node_id: str
    advertise: str
    state: DrainerState
    registry: NodeRegistry
    collector: Collector
    feed: MergeFeed
    syncer: Syncer
    checkpointer: Checkpointer
    metrics: DrainerMetrics
    backlog: PumpBacklog | None = None  # measures for ``backlog-threshold``, when set
    latest: LatestTs | None = None  # PD mode: PD's time for updateTS, refreshed in the background

    def status(self) -> NodeStatus:
        state = self.state.state
        return NodeStatus(
            node_id=self.node_id,
            addr=self.advertise,
            state=state,
            is_alive=state is NodeState.ONLINE,
            max_commit_ts=self.checkpointer.saved_ts,
            update_ts=self.latest.approach() if self.latest else from_seconds(time.time()),
        )

    def synced(self) -> bool:
        return self.syncer.synced(self.cfg.synced_check_time * 60)

    def ready(self) -> bool:
        return self.state.state is NodeState.ONLINE and self.collector.ready


async def serve(
    cfg: DrainerConfig,
    stop: asyncio.Event,
    started: Callable[[Started], None] = lambda _: None,
    *,
    sink: Sink | None = None,
) -> NodeState:
    """Run a drainer until ``stop`` is set or an operator pauses/closes it.

    ``sink`` overrides the configured downstream. Returns the state recorded at exit
    (``paused`` or ``offline``).
    """
    data_dir = Path(cfg.data_dir)
    async with claim_node(
        data_dir, cfg.listen.addr, cfg.listen.advertise_addr, cfg.node_id
    ) as node:
        node_id, sock, advertise = node.node_id, node.sock, node.advertise
        ctx = ContextAdapter(log, {"node_id": node_id})
        check_marker(data_dir, cfg.rejoin, "drainer")  # a closed drainer stays offline
        async with AsyncExitStack() as stack:
            kv = await stack.enter_async_context(EtcdKv.connect(list(cfg.pd_urls)))
            client_ssl = client_context(cfg.security, check_hostname=False)
            clock = await discover(kv, cfg.pd_urls, create=True, ssl_context=client_ssl)
            cluster_id = clock.cluster_id
            assert cluster_id is not None  # created in standalone mode, PD's in PD mode
            history = await stack.enter_async_context(_open_history(cfg.syncer.ddl_history, kv))
            pump_client = PumpClientCounters()  # stays empty unless the sink is pump://
            if sink is None:
                sink = await _open_sink(stack, cfg, cluster_id, pump_client)
            store = FileCheckpoint(data_dir)
            first = await _first_ts(
                cfg,
                store,
                sink,
                lambda: current_tso(kv, clock, client_ssl),
                ctx,
                (cluster_id, history),
            )
            checkpointer = Checkpointer(store, first, interval=cfg.checkpoint_interval)
            merged: asyncio.Queue[PulledBinlogItem] = asyncio.Queue(cfg.cache_binlog_count)
            feed = MergeFeed(Merger(first), merged)
            converter = Converter(
                history, cfg.syncer.table_filter(), cfg.syncer.ignore_txn_commit_ts
            )

            metrics = DrainerMetrics(
                lambda: _before_scrape(drainer, converter), pump_client=pump_client.totals
            )
            if isinstance(sink, TimesQueries):
                sink.query_timer = metrics.observe_query

            def make_puller(pump_id: str, addr: str, from_ts: int, inbox: Inbox) -> Puller:
                observe = PullMetrics(
                    metrics.read_size.labels(pump_id).observe,
                    metrics.reach.labels(pump_id).observe,
                    metrics.error,
                )
                return Puller(
                    pump_id,
                    addr,
                    cluster_id,
                    from_ts,
                    inbox,
                    ssl_context=client_ssl,
                    metrics=observe,
                )

            catchup = make_catchup(cfg)
            syncer = Syncer(
                merged,
                sink,
                checkpointer,
                converter.convert,
                batch_rows=cfg.syncer.effective_batch_rows(),
                safe_mode=cfg.syncer.safe_mode,
                catchup=catchup,
                observe_execute=metrics.execute.observe,
            )
            backlog = None
            if catchup is not None and catchup.settings.backlog_threshold > 0:
                asker = grpc_asker(cluster_id, ssl_context=client_ssl)
                backlog = PumpBacklog(NodeRegistry(kv), asker)
            drainer = Drainer(
                cfg=cfg,
                node_id=node_id,
                advertise=advertise,
                state=DrainerState(NodeState.ONLINE),
                registry=NodeRegistry(kv),
                collector=Collector(kv, feed, make_puller, detect_interval=cfg.detect_interval),
                feed=feed,
                syncer=syncer,
                checkpointer=checkpointer,
                metrics=metrics,
                backlog=backlog,
                latest=LatestTs(kv, clock, tls=client_ssl) if clock.pd else None,
            )
            final = await _run(drainer, sock, stop, stack, started, cluster_id, first)
            if final is NodeState.OFFLINE:
                write_marker(data_dir, node_id)
            ctx.info("stopped at checkpoint %d; recorded state %s", checkpointer.saved_ts, final)
            return final


def _before_scrape(d: Drainer, converter: Converter) -> None:
    """Copy the drainer's plain numbers into its metrics (run on every scrape)."""
    m = d.metrics
    m.sync(
        d.collector.positions(),
        d.feed.merger.stats,
        d.checkpointer.saved_ts,
        d.syncer.applied,
        time.time(),
        d.syncer.catchup,
    )
    m.count_applied(d.syncer.events, converter.ddl_jobs)
    m.queues(d.feed.inbox_sizes(), *d.syncer.queue_sizes())


def make_catchup(cfg: DrainerConfig) -> CatchUp | None:
    """The catch-up controller ``[syncer.catchup]`` asks for, if enabled."""
    c = cfg.syncer.catchup
    if not c.enabled:
        return None
    job = job_spec(c, Path(cfg.catchup_staging()).absolute(), cfg.syncer.sink_url(cfg.data_dir))
    return CatchUp(
        CatchUpSettings(
            job,
            lag_threshold=c.lag_threshold,
            backlog_threshold=c.backlog_threshold,
            backlog_interval=c.backlog_interval,
            resume_lag=c.resume_lag,
            idle=c.idle,
            max_range_rows=c.max_range_rows,
            retries=c.retries,
            retry_delay=c.retry_delay,
        )
    )


@contextlib.asynccontextmanager
async def _open_history(source: str, kv: Kv) -> AsyncIterator[DdlHistory]:
    """The DDL history: ours in etcd, or a TiDB server's HTTP API."""
    if not source:
        yield KvDdlHistory(kv)
        return
    async with TidbHttpDdlHistory.connect(source) as history:
        yield history


async def _open_sink(
    stack: AsyncExitStack, cfg: DrainerConfig, cluster_id: int, pump_client: PumpClientCounters
) -> Sink:
    url = cfg.syncer.sink_url(cfg.data_dir)
    options = SinkOptions(
        cluster_id,
        safe_mode=True,  # the syncer sets it before every batch
        worker_count=cfg.syncer.worker_count,
        batch_size=cfg.syncer.txn_batch,
    )
    options = pump_client.options(url, options)
    try:
        sink = await stack.enter_async_context(open_sink(url, options))
    except DownstreamError as e:
        raise SinkError(
            f"cannot open the downstream {redact(url)}: {e}", retriable=e.retriable
        ) from e
    log.info("downstream %s", redact(url))
    return sink


async def _first_ts(
    cfg: DrainerConfig,
    store: FileCheckpoint,
    sink: Sink,
    tso_now: Callable[[], Awaitable[int]],
    ctx: ContextAdapter,
    cluster: tuple[int, DdlHistory],
) -> int:
    """Where to start: the sink's own checkpoint (it holds the data), else the savepoint file,
    else ``initial-commit-ts`` (-1: the current TSO time). The savepoint file is brought to
    it, so a crash before the first periodic save cannot move it. An ``initial-state`` not
    taken yet comes first (``initial.start_from`` checks it against the other two)."""
    saved = await store.load()
    downstream = await sink.checkpoint()
    path = Path(cfg.initial_state) if cfg.initial_state else None
    state = initial.read_state(path) if path else None
    if path and state and not await asyncio.to_thread(initial.taken, store.path.parent, state):
        cluster_id, history = cluster
        first = await initial.start_from(
            path,
            state,
            cluster_id=cluster_id,
            history=history,
            store=store,
            saved=saved,
            downstream=downstream,
        )
        ctx.info(
            "starting from the exported state %s: after commit ts %d (exported from %s, %d DDL "
            "jobs up to schema version %d)",
            path,
            first,
            state.node_id or "a drainer",
            len(state.jobs),
            state.schema_version,
        )
        return first
    if downstream is not None:
        first = downstream
        ctx.info("resuming after the downstream's checkpoint %d (savepoint file: %s)", first, saved)
    else:
        first, loaded = await start_ts(saved, cfg.initial_commit_ts, tso_now)
        if loaded:
            ctx.info("resuming after checkpoint %d (consistent=%s)", first, store.consistent)
        else:
            ctx.info("no checkpoint yet; starting after commit ts %d", first)
    if saved != first:
        await store.save(first, False)
    return first


async def _run(
    d: Drainer,
    sock: socket.socket,
    stop: asyncio.Event,
    stack: AsyncExitStack,
    started: Callable[[Started], None],
    cluster_id: int,
    first: int,
) -> NodeState:
    heartbeat = Heartbeat(d.registry, NodeKind.DRAINER, d.status, d.cfg.heartbeat_interval)
    async with asyncio.TaskGroup() as tg:
        intake = [
            tg.create_task(d.collector.run(), name="drainer-collector"),
            tg.create_task(d.feed.run(), name="drainer-merge"),
        ]
        syncer = tg.create_task(d.syncer.run(), name="drainer-syncer")
        saver = tg.create_task(d.checkpointer.run(), name="drainer-checkpoint")
        watch_stop = tg.create_task(_on_stop(stop, d.state), name="drainer-stop-signal")
        side = [watch_stop]
        if d.latest is not None:
            side.append(tg.create_task(d.latest.run(), name="drainer-latest-ts"))
        if d.backlog is not None and d.syncer.catchup is not None:
            measure = d.syncer.catchup.measure_backlog(d.backlog, lambda: d.checkpointer.applied_ts)
            side.append(tg.create_task(measure, name="drainer-backlog"))
        await d.collector.wait_ready()
        server, http_port = await _serve_edges(d, sock, stack)
        await heartbeat.beat_now()  # registered online before anyone is told we started
        beating = tg.create_task(heartbeat.run(), name="drainer-heartbeat")
        grpc_port = sock.getsockname()[1]
        log.info(
            "drainer %s serving gRPC on port %d (advertised %s), HTTP on port %d, cluster %d",
            d.node_id,
            grpc_port,
            d.advertise,
            http_port,
            cluster_id,
        )
        started(Started(d.node_id, cluster_id, grpc_port, http_port, d.advertise, first))

        await d.state.exit.wait()
        log.info("stopping (%s)", d.state.state.value)
        await _beat_quietly(heartbeat)
        await _stop(d, server, intake, syncer, saver)
        beating.cancel()
        for task in side:
            task.cancel()
    final = d.state.final()
    d.state.settle(final)
    await d.registry.update(NodeKind.DRAINER, d.status())
    return final


async def _serve_edges(
    d: Drainer, sock: socket.socket, stack: AsyncExitStack
) -> tuple[Server, int]:
    """Start gRPC ``Cistern`` and the ops HTTP API on ``sock`` (and ``status-addr``);
    (server, HTTP port)."""
    cfg = d.cfg
    server = grpc_server([CisternApi(d.collector.refresh)])
    enforce_allowed_cn(server, cfg.security.cert_allowed_cn)
    stack.callback(server.close)
    ops = OpsServer(
        *status_addr(cfg.listen.addr, cfg.status_addr),
        routes=routes(
            d.node_id,
            d.state,
            d.collector.positions,
            d.synced,
            lambda: d.checkpointer.saved_ts,
            d.syncer.catchup,
            redact(cfg.syncer.sink_url(cfg.data_dir)),
        ),
        registry=d.metrics.registry,
        ready_fn=d.ready,
        ssl_context=server_context(cfg.security, alpn=ALPN_HTTP),
        allowed_cns=cfg.security.cert_allowed_cn,
    )
    stack.push_async_callback(ops.close)
    http_port = await serve_grpc_and_http(server, sock, ops, cfg.security, cfg.status_addr)
    return server, http_port


async def _stop(
    d: Drainer,
    server: Server,
    intake: list[asyncio.Task[NoReturn]],
    syncer: asyncio.Task[NoReturn],
    saver: asyncio.Task[None],
) -> None:
    """Stage 1: no more Notify, no more pulling. Stage 2: apply what was merged, then save
    the checkpoint a last time (consistent when nothing merged was left unapplied)."""
    server.close()
    try:
        async with asyncio.timeout(SHUTDOWN_GRACE):
            await server.wait_closed()
    except TimeoutError:
        log.warning("gRPC handlers did not finish within %.0f s", SHUTDOWN_GRACE)
    for task in intake:
        task.cancel()
    await asyncio.wait(intake)
    drained = await d.syncer.drain(DRAIN_TIMEOUT)
    syncer.cancel()
    await asyncio.wait([syncer])
    d.checkpointer.close(consistent=drained)
    await asyncio.wait([saver])


async def _on_stop(stop: asyncio.Event, state: DrainerState) -> None:
    await stop.wait()
    state.stopping()


async def _beat_quietly(heartbeat: Heartbeat) -> None:
    try:
        await heartbeat.beat_now()
    except KvError as e:
        log.warning("could not record the state change now (heartbeat retries): %s", e)
