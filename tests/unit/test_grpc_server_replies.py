"""The replies our grpclib servers (``servicekit.grpcserver``) send before any handler runs, as
raw HTTP/2 headers from a real server on a loopback port: an unknown method or service is a
gRPC reply (``:status 200``, a gRPC content-type, grpc-status), as grpc-go requires, and a
request that cannot be decoded is answered INTERNAL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import grpclib.server
import h2.config
import h2.connection
import h2.events
import pytest

from services.drainer.api import CisternApi
from tributary.servicekit import grpcserver
from tributary.servicekit.grpcserver import grpc_server
from tributary.servicekit.net import bind

UNIMPLEMENTED = "12"


async def _refresh() -> None:
    return None


@asynccontextmanager
async def cistern() -> AsyncIterator[int]:
    """A drainer's Cistern server on a loopback port; yields the port."""
    server = grpc_server([CisternApi(_refresh)])
    sock = bind("127.0.0.1:0")
    await server.start(sock=sock)
    try:
        yield int(sock.getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def reply_headers(
    port: int, path: str, message: bytes = b"", content_type: str = "application/grpc"
) -> dict[str, str]:
    """Every header of the reply to one request (response headers and trailers together)."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    request = [(":method", "POST"), (":scheme", "http"), (":path", path)]
    request += [(":authority", f"127.0.0.1:{port}"), ("content-type", content_type)]
    request += [("te", "trailers")]
    conn.send_headers(1, request)
    conn.send_data(1, b"\x00" + len(message).to_bytes(4, "big") + message, end_stream=True)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    headers: dict[str, str] = {}
    try:
        writer.write(conn.data_to_send())
        async with asyncio.timeout(10):
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                        headers.update((_text(k), _text(v)) for k, v in event.headers)
                    if isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                        return headers
                writer.write(conn.data_to_send())
        raise AssertionError(f"connection closed before the reply ended: {headers}")
    finally:
        writer.close()
        await writer.wait_closed()


def _text(header: bytes | str) -> str:
    return header.decode() if isinstance(header, bytes) else header


@pytest.mark.parametrize("path", ["/binlog.Cistern/NoSuchMethod", "/no.such.Service/Call"])
async def test_an_unknown_method_or_service_is_a_grpc_reply(path: str) -> None:
    async with cistern() as port:
        headers = await reply_headers(port, path)
    assert headers[":status"] == "200"
    assert headers["content-type"] == "application/grpc"
    assert headers["grpc-status"] == UNIMPLEMENTED
    assert headers["grpc-message"] == "Method not found"


async def test_a_handled_call_replies_as_before() -> None:
    async with cistern() as port:
        headers = await reply_headers(port, "/binlog.Cistern/Notify")
    assert headers[":status"] == "200"
    assert headers["content-type"] == "application/grpc+proto"
    assert headers["grpc-status"] == "0"


async def test_an_undecodable_request_is_answered_internal() -> None:
    async with cistern() as port:
        headers = await reply_headers(port, "/binlog.Cistern/Notify", message=b"\xff")
    assert headers[":status"] == "200"
    assert headers["content-type"].startswith("application/grpc")
    assert headers["grpc-status"] == "13"
    assert headers["grpc-message"].startswith("cannot decode the request")


async def test_a_request_that_is_not_grpc_is_still_refused_by_its_http_status() -> None:
    async with cistern() as port:
        headers = await reply_headers(port, "/binlog.Cistern/Notify", content_type="text/plain")
    assert headers[":status"] == "415"
    assert "content-type" not in headers  # not a gRPC reply: grpc-go reads the HTTP status


def test_the_abort_is_installed_once_for_the_grpclib_in_use() -> None:
    assert grpcserver.install_abort()
    assert grpclib.server._abort is grpcserver.abort
    assert grpcserver.install_abort()


def test_a_grpclib_that_aborts_differently_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def other(stream: object, status: int) -> None:
        return None

    changed: Callable[..., object] = other
    monkeypatch.setattr(grpclib.server, "_abort", changed)
    assert not grpcserver.install_abort()
    assert grpclib.server._abort is changed
    assert "aborts differently" in caplog.text
