"""The writer process's side of a pump served by front processes (``front-processes`` > 1).

The writer keeps everything that has state: storage and its sorter, the registry record, the
TSO member, GC, the HTTP API and every RPC but the two writes. It serves them on local names
only (the gRPC server and an HTTP server without TLS: the fronts end TLS and check
``cert-allowed-cn``), takes the fronts' batches on the front link, and starts the fronts,
which listen on the pump's port. Its own socket on that port stays bound (``SO_REUSEPORT``,
holding the port for the pump) and never listens, so every connection goes to a front.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from typing import Protocol

from grpclib.server import Server

from services.pump.intake import Intake
from services.pump.metrics import PumpMetrics
from services.pump.split.front import FrontSpec
from services.pump.split.fronts import Fronts
from services.pump.split.local import listen_local, local_names
from services.pump.split.writer import WriterEnd
from tributary.config.pump import PumpConfig
from tributary.telemetry.http import OpsServer, Routes


class ServedPump(Protocol):
    """The pump the fronts serve (the app's ``Pump``, in the writer process): the intake their
    batches go to, the metrics their observations are added to, and ``/ready``."""

    @property
    def intake(self) -> Intake: ...

    @property
    def metrics(self) -> PumpMetrics: ...

    def ready(self) -> bool: ...


def _methods(handlers: list[object]) -> dict[str, str]:
    methods: dict[str, str] = {}
    for h in handlers:
        for path, handler in h.__mapping__().items():  # type: ignore[attr-defined]
            methods[path] = handler.cardinality.name
    return methods


async def serve_through_fronts(
    stack: AsyncExitStack,
    cfg: PumpConfig,
    server: Server,
    handlers: list[object],
    ops_routes: Routes,
    pump: ServedPump,
    cluster_id: int,
    port: int,
) -> Fronts:
    """Serve the internal names, start ``cfg.fronts`` fronts on ``port`` and wait until they
    listen; everything is closed by ``stack``, the fronts stopped first."""
    names = local_names("writer", "grpc", "http")
    await server.start(sock=listen_local(names["grpc"]))
    internal = OpsServer(
        "localhost",
        0,
        routes=ops_routes,
        registry=pump.metrics.registry,
        ready_fn=pump.ready,
    )
    stack.push_async_callback(internal.close)
    http = await asyncio.get_running_loop().create_unix_server(
        await internal.protocol_factory(), sock=listen_local(names["http"])
    )
    stack.callback(http.close)
    host = cfg.listen.addr.rsplit(":", 1)[0]
    spec = FrontSpec(
        addr=f"{host}:{port}",
        writer=names["writer"],
        grpc=names["grpc"],
        http=names["http"],
        cluster_id=cluster_id,
        max_message_size=cfg.max_message_size,
        methods=_methods(handlers),
        security=cfg.security,
        log=cfg.log,
        parent=os.getpid(),
    )
    fronts = Fronts(spec, cfg.fronts)
    link = WriterEnd(pump.intake, hello=fronts.hello, observed=pump.metrics.merge_rpc)
    await link.start(names["writer"])
    stack.push_async_callback(link.close)
    stack.push_async_callback(fronts.stop)
    await fronts.start()
    return fronts
