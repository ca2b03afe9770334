"""What a front process passes through to the writer process: every RPC it does not serve
itself, and the HTTP API.

The kernel spreads a port's connections over the fronts (``SO_REUSEPORT``), so a drainer's
``PullBinlogs``, a ``Backlog`` call, a PD client's ``Tso`` stream or binlogctl's ``GET /status``
may reach any front. A front relays such an RPC, message for message and with its status, to
the writer's internal gRPC server (``RelayedRpc``), and splices an HTTP/1 connection byte for
byte to the writer's internal HTTP server (``HttpSplice``), both on local sockets. TLS ends in
the front; ``cert-allowed-cn`` is enforced there (gRPC per request by ``grpcauth``, HTTP per
connection, the certificate being the connection's), so the internal servers check nothing.

Invariant: a relayed call's messages arrive in order and its final status is the writer's
(UNAVAILABLE when the writer cannot be reached); nothing is relayed before the front decided
the connection is gRPC or HTTP (``telemetry.oneport``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Callable, Collection
from typing import Any, cast

from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError
from grpclib.server import Stream

from services.pump.split.local import LocalChannel, connect_local, handed_over
from tributary.coord.etcd_relay import RawMessage, forwarded_metadata
from tributary.telemetry.tls import cn_allowed, common_names

log = logging.getLogger(__name__)


class RelayedRpc:
    """grpclib handlers relaying ``methods`` (path -> cardinality) to the writer process."""

    def __init__(self, channel: LocalChannel, methods: dict[str, Cardinality]) -> None:
        self._channel = channel
        self._methods = methods

    def __mapping__(self) -> dict[str, Handler]:
        return {
            path: Handler(self._handler(path, card), card, RawMessage, RawMessage)
            for path, card in self._methods.items()
        }

    def _handler(self, path: str, card: Cardinality) -> Any:
        async def relay(stream: Stream[RawMessage, RawMessage]) -> None:
            try:
                async with self._channel.request(
                    path,
                    card,
                    RawMessage,
                    RawMessage,
                    deadline=stream.deadline,
                    metadata=forwarded_metadata(stream.metadata),
                ) as upstream:
                    await _relay(stream, upstream, card)
            except (StreamTerminatedError, ProtocolError, OSError) as e:
                raise GRPCError(Status.UNAVAILABLE, f"pump writer unreachable: {e!r}") from e

        return relay


async def _relay(down: Any, up: Any, card: Cardinality) -> None:
    if card.client_streaming:
        await up.send_request()
        sending = asyncio.create_task(_copy_up(down, up), name="pump-front-relay-up")
    else:
        request = await down.recv_message()
        await up.send_message(request, end=True)
        sending = None
    try:
        while (message := await up.recv_message()) is not None:
            await down.send_message(message)
        await up.recv_trailing_metadata()  # raises GRPCError with the writer's status
    finally:
        if sending is not None:
            sending.cancel()


async def _copy_up(down: Any, up: Any) -> None:
    async for message in down:
        await up.send_message(message)
    await up.end()


_FORBIDDEN = "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {n}\r\n"


class HttpSplice(asyncio.Protocol):
    """One HTTP/1 connection accepted by a front, copied both ways to the writer's HTTP API."""

    def __init__(self, name: str, allowed_cns: Collection[str]) -> None:
        self._name = name
        self._allowed = frozenset(allowed_cns)
        self._down: asyncio.Transport | None = None
        self._up: asyncio.Transport | None = None
        self._early: list[bytes] = []
        self._eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._down = cast(asyncio.Transport, transport)
        if self._allowed and not self._peer_allowed():
            return
        try:
            sock = connect_local(self._name)
        except OSError as e:
            log.warning("pump writer's HTTP API unreachable: %s", e)
            self._down.close()
            return
        loop = asyncio.get_running_loop()
        task = loop.create_task(
            loop.create_unix_connection(lambda: _Back(self), sock=sock), name="pump-front-http"
        )
        task.add_done_callback(lambda t: self._connected(t, sock))

    def _peer_allowed(self) -> bool:
        assert self._down is not None
        ssl_object = self._down.get_extra_info("ssl_object")
        cert = ssl_object.getpeercert() if ssl_object is not None else None
        if cn_allowed(cert, self._allowed):
            return True
        names = ", ".join(common_names(cert)) or "no client certificate"
        message = f"client certificate CN not allowed ({names})"
        body = json.dumps({"error": message, "status": 403}).encode()
        head = _FORBIDDEN.format(n=len(body)) + "Connection: close\r\n\r\n"
        self._down.write(head.encode() + body)
        self._down.close()
        return False

    def _connected(
        self, task: asyncio.Task[tuple[asyncio.BaseTransport, Any]], sock: socket.socket
    ) -> None:
        if task.cancelled() or task.exception() is not None:
            sock.close()
            if self._down is not None:
                self._down.close()
            return
        up = cast(asyncio.Transport, task.result()[0])
        handed_over(sock, up)
        if self._down is None:
            up.close()
            return
        if self._down.is_closing():
            up.close()
            return
        self._up = up
        for chunk in self._early:
            up.write(chunk)
        self._early = []
        if self._eof:
            up.write_eof()

    def data_received(self, data: bytes) -> None:
        if self._up is not None:
            self._up.write(data)
        else:
            self._early.append(data)

    def eof_received(self) -> bool:
        if self._up is not None:
            self._up.write_eof()
        self._eof = True
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._down = None
        if self._up is not None:
            self._up.close()

    def from_writer(self, data: bytes) -> None:
        if self._down is not None:
            self._down.write(data)

    def writer_done(self) -> None:
        if self._down is not None:
            self._down.close()


class _Back(asyncio.Protocol):
    def __init__(self, front: HttpSplice) -> None:
        self._front = front

    def data_received(self, data: bytes) -> None:
        self._front.from_writer(data)

    def eof_received(self) -> bool:
        self._front.writer_done()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._front.writer_done()


def http_splice(name: str, allowed_cns: Collection[str]) -> Callable[[], asyncio.BaseProtocol]:
    return lambda: HttpSplice(name, allowed_cns)
