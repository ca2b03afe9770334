"""Composition root of the standalone TSO server.

Builds, in order: the etcd connection, the deployment's cluster ID, the
listening socket (so the real port is known before advertising it), the
TsoMember and the gRPC server (``binlogext.Tso``, the ``pdpb.PD`` subset a PD
client needs, and etcd's client API relayed to our etcd, so a PD client such
as TiDB's pump client can be given this address alone); tears them down in
reverse. Invariant: the
member only campaigns once its advertised address is known to be served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from grpclib.server import Server

from tributary.coord.cluster_id import ensure_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.coord.etcd_relay import EtcdRelay
from tributary.coord.kv import Kv
from tributary.net import join_host_port, split_host_port
from tributary.servicekit.grpcserver import grpc_server
from tributary.telemetry.coalesce import coalesced
from tributary.tso.clock import Clock
from tributary.tso.member import MemberTiming, TsoMember
from tributary.tso.pd_service import PdService
from tributary.tso.service import TsoService

log = logging.getLogger(__name__)

DEFAULT_ADDR = "127.0.0.1:8240"


@dataclass(frozen=True, slots=True)
class TsoServerConfig:
    pd_urls: tuple[str, ...]  # etcd endpoints
    addr: str = DEFAULT_ADDR  # host:port to bind; port 0 picks a free one
    advertise_addr: str = ""  # host:port for clients; empty = the bound address
    log_level: str = "info"


class TsoServerApp:
    """Async context manager running one TSO member and its gRPC endpoint."""

    def __init__(
        self,
        config: TsoServerConfig,
        *,
        kv: Kv | None = None,
        clock: Clock | None = None,
        timing: MemberTiming | None = None,
    ) -> None:
        self._config = config
        self._kv = kv
        self._clock = clock
        self._timing = timing or MemberTiming()
        self._stack = AsyncExitStack()
        self.port = 0
        self.advertise_addr = ""
        self.cluster_id = 0
        self._member: TsoMember | None = None

    @property
    def member(self) -> TsoMember:
        if self._member is None:
            raise RuntimeError("TsoServerApp not entered")
        return self._member

    async def __aenter__(self) -> TsoServerApp:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def serve_until(self, stop: asyncio.Event) -> None:
        """Return when ``stop`` is set; raise if the member fails first."""
        member = asyncio.create_task(self.member.join(), name="tso-server-member")
        stopping = asyncio.create_task(stop.wait(), name="tso-server-stop")
        try:
            await asyncio.wait({member, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (member, stopping):
                task.cancel()
            await asyncio.gather(member, stopping, return_exceptions=True)
        if not member.cancelled() and member.exception() is not None:
            member.result()

    async def _start(self) -> None:
        kv = self._kv
        if kv is None:
            kv = await self._stack.enter_async_context(EtcdKv.connect(list(self._config.pd_urls)))
        self.cluster_id = await ensure_cluster_id(kv)
        sock = _bind(self._config.addr)
        self._stack.callback(sock.close)
        host, self.port = sock.getsockname()[:2]
        self.advertise_addr = self._config.advertise_addr or _join(host, self.port)
        member = TsoMember(
            kv, self.cluster_id, self.advertise_addr, clock=self._clock, timing=self._timing
        )
        handlers: list[object] = [TsoService(member), PdService(member)]
        if self._config.pd_urls:  # etcd's API too, so PD clients need only this address
            relay = EtcdRelay(self._config.pd_urls)
            self._stack.callback(relay.close)
            handlers.append(relay)
        server = grpc_server(handlers)
        connections = _track_connections(server)
        await server.start(sock=sock)
        self._stack.push_async_callback(_stop_server, server, connections)
        self._member = await self._stack.enter_async_context(member)
        log.info("TSO member %s started for cluster %d", self.advertise_addr, self.cluster_id)


def _bind(addr: str) -> socket.socket:
    host, port = split_host_port(addr)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio and grpclib only set TCP_NODELAY on sockets that
    # say so, and without it every response waits out the peer's delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
    except OSError:
        sock.close()
        raise
    return sock


def _join(host: str, port: int) -> str:
    if host in ("0.0.0.0", "::", ""):
        raise ValueError("listening on all interfaces: set --advertise-addr to a reachable host")
    return join_host_port(host, port)


def _track_connections(server: Server) -> set[asyncio.BaseTransport]:
    """The server's accepted connections, kept so that a stop closes them.

    grpclib's ``close`` stops the listener and cancels the handlers but leaves accepted
    connections open (asyncio's server of Python 3.11 does not close them either): a PD client
    would keep a connection to a member that no longer serves instead of moving to the new
    leader, and an in-process stop would leak the sockets."""
    transports: set[asyncio.BaseTransport] = set()
    make = server._protocol_factory  # grpclib: one H2Protocol per accepted connection

    def factory() -> Any:
        protocol = make()
        made = protocol.connection_made

        def connection_made(transport: asyncio.BaseTransport) -> None:
            transports.add(transport)
            made(transport)

        protocol.connection_made = connection_made  # type: ignore[method-assign]
        return protocol

    setattr(server, "_protocol_factory", coalesced(factory))  # noqa: B010
    return transports


async def _stop_server(server: Server, connections: set[asyncio.BaseTransport]) -> None:
    server.close()
    with contextlib.suppress(asyncio.TimeoutError):
        async with asyncio.timeout(5):
            await server.wait_closed()
    for transport in connections:
        transport.close()
