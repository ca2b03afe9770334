"""gRPC and the ops HTTP API on one port, as tidb-binlog serves them (pump 8250, drainer 8249).

grpclib's ``Server`` keeps owning the listening socket; :func:`share_port` wraps its protocol
factory so every accepted connection first meets a :class:`Sniffer`. The sniffer picks the
protocol, then hands the transport over (``set_protocol`` + ``connection_made``) and replays the
bytes it buffered:

- with TLS, ALPN decides first: ``h2`` is gRPC, ``http/1.1`` is the HTTP API;
- otherwise the first bytes do: HTTP/2's client preface ``PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n``
  is gRPC, an HTTP/1 request line (``GET /status HTTP/1.1``) the HTTP API.

Worked example: ``b"PRI * HT"`` is a prefix of the preface, so the sniffer waits; ``b"GET "`` is
an HTTP/1 method and goes to aiohttp; ``b"\\x16\\x03\\x01"`` (TLS to a plain port) or
``b"hello"`` without a space goes nowhere: the connection is closed. Invariant: nothing reaches
either server before the decision, no byte is lost or reordered across it, and a connection
that sends nothing decidable within ``SNIFF_TIMEOUT`` seconds is closed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
from collections.abc import Callable
from typing import cast

from grpclib.server import Server

from tributary.telemetry.coalesce import coalesced

log = logging.getLogger(__name__)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""The HTTP/2 client connection preface (RFC 9113 3.4)."""

SNIFF_TIMEOUT = 10.0  # seconds an accepted connection may stay undecided
_METHOD = re.compile(rb"[A-Z]{1,20}")  # an HTTP/1 method token (GET, PUT, OPTIONS ...)
_MAX_METHOD = 20

ProtocolFactory = Callable[[], asyncio.BaseProtocol]


class Kind(enum.Enum):
    GRPC = "grpc"
    HTTP = "http"
    GARBAGE = "garbage"


def classify(data: bytes) -> Kind | None:
    """What the first bytes of a connection are; None while they could still be either."""
    if data.startswith(PREFACE):
        return Kind.GRPC
    if PREFACE.startswith(data):
        return None
    method = _METHOD.match(data)
    if method is None:
        return Kind.GARBAGE
    end = method.end()
    if end < len(data):
        return Kind.HTTP if data[end : end + 1] == b" " else Kind.GARBAGE
    return None if end < _MAX_METHOD else Kind.GARBAGE


def by_alpn(protocol: str | None) -> Kind | None:
    """The kind ALPN settled in the TLS handshake, None when it settled nothing."""
    if protocol == "h2":
        return Kind.GRPC
    if protocol == "http/1.1":
        return Kind.HTTP
    return None


class Sniffer(asyncio.Protocol):
    """Buffers a new connection's first bytes until it knows whom to hand it to."""

    def __init__(self, grpc: ProtocolFactory, http: ProtocolFactory) -> None:
        self._factories = {Kind.GRPC: grpc, Kind.HTTP: http}
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            kind = by_alpn(ssl_object.selected_alpn_protocol())
            if kind is not None:
                self._hand_over(kind)
                return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(SNIFF_TIMEOUT, self._give_up, "sent nothing decidable")

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        kind = classify(self._buffer)
        if kind is Kind.GARBAGE:
            self._give_up(f"began with {self._buffer[:16]!r}")
        elif kind is not None:
            self._hand_over(kind)

    def eof_received(self) -> bool | None:
        self._give_up("closed before a request")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._transport = None

    def _hand_over(self, kind: Kind) -> None:
        self._cancel_timer()
        transport, self._transport = self._transport, None
        if transport is None or transport.is_closing():
            return
        protocol = self._factories[kind]()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        buffered, self._buffer = self._buffer, b""
        if buffered and isinstance(protocol, asyncio.Protocol) and not transport.is_closing():
            protocol.data_received(buffered)

    def _give_up(self, why: str) -> None:
        self._cancel_timer()
        transport, self._transport = self._transport, None
        if transport is not None:
            peer = transport.get_extra_info("peername")
            log.info("closed a connection from %s that is neither gRPC nor HTTP: %s", peer, why)
            transport.close()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def share_port(server: Server, http: ProtocolFactory) -> None:
    """Make ``server`` (not yet started) hand HTTP/1 connections to ``http``'s protocols.

    Call before ``server.start``; with TLS, start it with a context offering both ALPN
    protocols (``telemetry.tls.ALPN_ONE_PORT``).
    """
    grpc = coalesced(server._protocol_factory)  # grpclib: one H2Protocol per connection
    setattr(server, "_protocol_factory", lambda: Sniffer(grpc, http))  # noqa: B010
