"""Composition root of ``binlog-pump``: builds every part in order, runs the
background duties in one TaskGroup, and tears down in reverse.

Start order: bind the gRPC socket (to learn the real port) -> node id and
data-dir lock -> etcd, cluster ID, registry -> TSO member and client ->
storage (recovery) -> gRPC and HTTP servers -> register online, notify
drainers if this pump is joining -> accept writes.

While running, a pump whose registry writes have failed for ``registration-timeout``
(etcd unreachable) refuses prewrites and is not ready until one succeeds again
(``services.pump.registration``).

Exit: an operator ``pause`` or a stop signal refuses new prewrites, stops the
servers and records ``paused``; ``close`` first waits until every drainer has
consumed this pump's binlogs, then records ``offline`` and leaves the offline
marker in the data directory: the next start refuses unless ``--rejoin``
(``tributary.registry.offline``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from services.pump import lifecycle
from services.pump.api import PumpApi, PumpBatchApi, PumpStatsApi
from services.pump.http import routes
from services.pump.intake import Intake
from services.pump.metrics import PumpMetrics
from services.pump.pullwire import PumpCodec
from services.pump.registration import Registration
from services.pump.split.fronts import Fronts
from services.pump.split.serving import serve_through_fronts
from services.pump.state import Action, PumpState
from services.pump.storage import (
    Resolver,
    RollbackResolver,
    Storage,
    StorageSettings,
    WaitResolver,
    wall_clock_ts,
)
from tributary.config.pump import PumpConfig
from tributary.coord.etcd import EtcdKv
from tributary.coord.etcd_relay import EtcdRelay
from tributary.registry.heartbeat import Heartbeat
from tributary.registry.offline import check_marker, write_marker
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.servicekit.grpcserver import grpc_server
from tributary.servicekit.net import status_addr
from tributary.servicekit.node import claim_node
from tributary.servicekit.serving import serve_grpc_and_http
from tributary.telemetry.grpcauth import enforce_allowed_cn
from tributary.telemetry.http import OpsServer
from tributary.telemetry.logs import ContextAdapter
from tributary.telemetry.tls import ALPN_HTTP, client_context, server_context
from tributary.tso.approach import ApproachTs
from tributary.tso.client import Tso
from tributary.tso.cluster import discover
from tributary.tso.member import TsoMember
from tributary.tso.pd_service import PdService
from tributary.tso.service import TsoService

log = logging.getLogger(__name__)

DETECT_PURGE_INTERVAL = 600.0  # seconds between checks of drainer checkpoints vs GC
SHUTDOWN_GRACE = 5.0  # seconds gRPC handlers get to finish at exit


@dataclass(frozen=True)
class Started:
    """What a running pump tells its launcher (tests bind port 0)."""

    node_id: str
    cluster_id: int
    grpc_port: int
    http_port: int
    advertise_addr: str


def storage_settings(cfg: PumpConfig) -> StorageSettings:
    s = cfg.storage
    return StorageSettings(
        sync_log=s.sync_log,
        segment_size=s.segment_size,
        kv_chan_cap=s.kv_chan_cap,
        slow_write_threshold=s.slow_write_threshold,
        max_txn_timeout=s.max_txn_timeout,
        stop_write_at_available_space=s.stop_write_at_available_space,
    )


def resolver_for(cfg: PumpConfig) -> Resolver:
    """``[storage] stuck-prewrite-action``: wait (default, loses nothing) or rollback."""
    if cfg.storage.stuck_prewrite_action == "rollback":
        return RollbackResolver()
    return WaitResolver()


@dataclass
class Pump:
    """The parts of one running pump, as built by :func:`serve`."""

    cfg: PumpConfig
    node_id: str
    advertise: str
    state: PumpState
    intake: Intake
    storage: Storage
    tso: Tso
    registry: NodeRegistry
    metrics: PumpMetrics
    registration: Registration
    latest_ts: Callable[[], int] = wall_clock_ts  # the TSO's time now (updateTS)
    fronts: Fronts | None = None  # the front processes serving the port, if any

    def status(self, state: NodeState | None = None) -> NodeStatus:
        return lifecycle.status_of(
            self.node_id,
            self.advertise,
            state or self.state.state,
            self.storage.max_commit_ts,
            self.latest_ts(),
            tuple(self.storage.stats.stuck_prewrites),
        )

    def ready(self) -> bool:
        """``/ready``: online and registered (a pump cut from etcd is not ready), whichever
        process answers it (the single process, or the writer for its fronts)."""
        return self.state.state is NodeState.ONLINE and self.registration.current()

    async def record(self, state: NodeState | None = None) -> None:
        await self.registry.update(NodeKind.PUMP, self.status(state))
        self.registration.renewed()

    async def trigger_gc(self) -> int:
        gc_ts = lifecycle.gc_ts_for(time.time(), self.cfg.gc)
        await self.storage.gc(gc_ts)
        return gc_ts

    async def run_until_exit(self, stop: asyncio.Event, member: TsoMember | None) -> NodeState:
        """Run the background duties until a stop or an operator action; the state to record."""
        cfg = self.cfg
        async with asyncio.TaskGroup() as tg:
            duties = [
                tg.create_task(
                    Heartbeat(
                        self.registry,
                        NodeKind.PUMP,
                        self.status,
                        cfg.heartbeat_interval,
                        on_written=lambda _: self.registration.renewed(),
                    ).run(),
                    name="pump-heartbeat",
                ),
                tg.create_task(
                    lifecycle.fake_binlog_loop(
                        self.intake,
                        self.tso,
                        cfg.gen_binlog_interval,
                        active=lambda: self.state.state is NodeState.ONLINE,
                    ),
                    name="pump-fake-binlog",
                ),
                tg.create_task(
                    lifecycle.gc_loop(self.storage, cfg.gc, cfg.gc_interval), name="pump-gc"
                ),
                tg.create_task(self._detect_purges(), name="pump-detect-purge"),
            ]
            if member is not None:
                duties.append(tg.create_task(member.join(), name="pump-tso-member"))
            if self.fronts is not None:
                duties.append(tg.create_task(self.fronts.supervise(), name="pump-fronts"))
            final = await self._wait_for_exit(stop)
            for task in duties:
                task.cancel()
        return final

    async def _wait_for_exit(self, stop: asyncio.Event) -> NodeState:
        state = self.state
        while True:
            if stop.is_set():
                log.info("stop requested; pausing")
                state.settle(NodeState.PAUSING)
                return NodeState.PAUSED
            if state.requested is Action.PAUSE:
                log.info("pause requested by an operator")
                return NodeState.PAUSED
            if state.requested is Action.CLOSE:
                log.info("close requested; waiting until drainers consumed everything")
                await self.record()
                await lifecycle.wait_safe_to_offline(
                    self.intake, self.storage, self.tso, self.registry
                )
                return NodeState.OFFLINE
            state.changed.clear()
            stopped = asyncio.ensure_future(stop.wait())
            changed = asyncio.ensure_future(state.changed.wait())
            try:
                await asyncio.wait({stopped, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                changed.cancel()

    async def _detect_purges(self) -> None:
        def alert(drainer: str) -> None:
            self.metrics.purge_alert.labels(drainer).inc()

        while True:
            await asyncio.sleep(DETECT_PURGE_INTERVAL)
            await lifecycle.detect_purged_drainers(self.registry, self.storage, alert)


async def serve(
    cfg: PumpConfig,
    stop: asyncio.Event,
    started: Callable[[Started], None] = lambda _: None,
) -> NodeState:
    """Run a pump until ``stop`` is set or an operator pauses/closes it.

    Returns the state recorded at exit (``paused`` or ``offline``).
    """
    data_dir = Path(cfg.data_dir)
    split = cfg.fronts > 1
    async with claim_node(
        data_dir, cfg.listen.addr, cfg.listen.advertise_addr, cfg.node_id, reuse_port=split
    ) as node:
        node_id, sock, grpc_port, advertise = (
            node.node_id,
            node.sock,
            node.grpc_port,
            node.advertise,
        )
        ctx = ContextAdapter(log, {"node_id": node_id})
        check_marker(data_dir, cfg.rejoin)  # before registering: an offline pump stays offline
        async with AsyncExitStack() as stack:
            kv = await stack.enter_async_context(EtcdKv.connect(list(cfg.pd_urls)))
            client_ssl = client_context(cfg.security, check_hostname=False)
            clock = await discover(kv, cfg.pd_urls, create=True, ssl_context=client_ssl)
            cluster_id = clock.cluster_id
            assert cluster_id is not None  # created in standalone mode, PD's in PD mode
            ctx.info(
                "cluster %d, timestamps from %s",
                cluster_id,
                "PD" if clock.pd else "our TSO",
            )
            registry = NodeRegistry(kv)
            previous = await registry.get(NodeKind.PUMP, node_id)
            member = None
            if cfg.embedded_tso and not clock.pd:  # in PD mode, PD is the one clock
                member = await stack.enter_async_context(TsoMember(kv, cluster_id, advertise))
            tso: Tso = await stack.enter_async_context(
                clock.tso(kv, member=member, ssl_context=client_ssl)
            )
            latest_ts = wall_clock_ts
            if clock.pd:  # PD's time, not ours: the last PD ts plus the local time since
                approach = ApproachTs()
                tso, latest_ts = approach.observing(tso), approach.approach
            storage = await stack.enter_async_context(
                Storage.open(data_dir, storage_settings(cfg), resolver_for(cfg), latest_ts)
            )
            state = PumpState(NodeState.OFFLINE)
            registration = Registration(cfg.registration_timeout)
            intake = Intake(storage, state, cfg.max_message_size, registered=registration.current)
            metrics = PumpMetrics(lambda: metrics.sync(storage.stats, intake.written))
            pump = Pump(
                cfg,
                node_id,
                advertise,
                state,
                intake,
                storage,
                tso,
                registry,
                metrics,
                registration,
                latest_ts,
            )

            handlers: list[object] = [
                PumpApi(cluster_id, intake, storage, metrics.observe_rpc),
                PumpBatchApi(cluster_id, intake),
                PumpStatsApi(cluster_id, storage),
            ]
            if member is not None:
                # PD's protocol and etcd's API on this port, as PD serves them: PD clients
                # (TiDB's pump client) can be pointed at the pumps of a standalone cluster
                relay = EtcdRelay(cfg.pd_urls)
                stack.callback(relay.close)
                tls = cfg.security.ssl_cert != ""
                handlers += [TsoService(member), PdService(member, tls=tls), relay]
            server = grpc_server(handlers, codec=PumpCodec())
            stack.callback(server.close)
            ops_routes = routes(node_id, state, registry, storage, latest_ts, pump.trigger_gc)
            ops = OpsServer(
                *status_addr(cfg.listen.addr, cfg.status_addr),
                routes=ops_routes,
                registry=metrics.registry,
                ready_fn=pump.ready,
                ssl_context=server_context(cfg.security, alpn=ALPN_HTTP),
                allowed_cns=cfg.security.cert_allowed_cn,
            )
            stack.push_async_callback(ops.close)
            if split:
                pump.fronts = await serve_through_fronts(
                    stack, cfg, server, handlers, ops_routes, pump, cluster_id, grpc_port
                )
                http_port = await ops.start() if cfg.status_addr else grpc_port
            else:
                enforce_allowed_cn(server, cfg.security.cert_allowed_cn)
                http_port = await serve_grpc_and_http(
                    server, sock, ops, cfg.security, cfg.status_addr
                )

            await pump.record(NodeState.ONLINE)
            if previous is None or previous.state is NodeState.OFFLINE:
                try:
                    told = await lifecycle.notify_drainers(registry, client_ssl)
                except lifecycle.NotifyFailed:
                    await pump.record(NodeState.OFFLINE)
                    raise
                ctx.info("joined the cluster; notified %d online drainer(s)", told)
            state.settle(NodeState.ONLINE)
            intake.last_write = time.monotonic()  # idle from now, not from before the fronts
            ctx.info(
                "serving gRPC on %s (advertised %s), HTTP on port %d, cluster %d",
                cfg.listen.addr,
                advertise,
                http_port,
                cluster_id,
            )
            started(Started(node_id, cluster_id, grpc_port, http_port, advertise))

            final = await pump.run_until_exit(stop, member)
            state.settle(NodeState.PAUSING if final is NodeState.PAUSED else state.state)
            if pump.fronts is not None:
                await pump.fronts.stop()  # their calls finish; the writer still stores
            server.close()
            try:
                async with asyncio.timeout(SHUTDOWN_GRACE):
                    await server.wait_closed()
            except TimeoutError:
                ctx.warning("gRPC handlers did not finish within %.0f s", SHUTDOWN_GRACE)
            state.settle(final)
            await pump.record(final)
            if final is NodeState.OFFLINE:
                write_marker(data_dir, node_id)
            ctx.info("stopped; recorded state %s", final.value)
            return final
