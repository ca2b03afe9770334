"""WriteCoalescer: one transport write per loop turn, in order, nothing lost at close; and a
grpclib server behind it answering real concurrent calls over loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Cardinality, Handler
from grpclib.encoding.base import CodecBase
from grpclib.server import Server, Stream

from tributary.telemetry.coalesce import WriteCoalescer, coalesced


class Recording:
    """The transport's side: what reached it, write by write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False
        self.eof = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def write_eof(self) -> None:
        self.eof = True

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def _coalescer() -> tuple[WriteCoalescer, Recording]:
    raw = Recording()
    return WriteCoalescer(raw, asyncio.get_running_loop()), raw  # type: ignore[arg-type]


async def _turn() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_writes_of_one_turn_reach_the_transport_as_one_in_order() -> None:
    w, raw = _coalescer()
    w.write(b"HEADERS")
    w.write(b"")
    w.write(bytearray(b"DATA"))
    w.writelines([b"TRAILERS", memoryview(b"!")])
    assert raw.writes == []
    assert w.get_write_buffer_size() == 7 + len(b"HEADERSDATATRAILERS!")
    await _turn()
    assert raw.writes == [b"HEADERSDATATRAILERS!"]
    w.write(b"next")
    await _turn()
    assert raw.writes == [b"HEADERSDATATRAILERS!", b"next"]


async def test_close_and_eof_send_what_is_kept_first_and_abort_drops_it() -> None:
    w, raw = _coalescer()
    w.write(b"last words")
    w.close()
    assert raw.writes == [b"last words"] and raw.closed
    await _turn()  # the scheduled flush finds nothing left
    assert raw.writes == [b"last words"]

    w, raw = _coalescer()
    w.write(b"half")
    w.write_eof()
    assert raw.writes == [b"half"] and raw.eof

    w, raw = _coalescer()
    w.write(b"never")
    w.abort()
    await _turn()
    assert raw.writes == [] and raw.aborted


async def test_a_write_after_the_transport_closed_is_not_sent() -> None:
    w, raw = _coalescer()
    w.write(b"late")
    raw.closed = True
    await _turn()
    assert raw.writes == []
    assert w.is_closing()  # passed on
    assert w.get_extra_info("peername") == ("127.0.0.1", 1)


class _Raw(CodecBase):
    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


class _Echo:
    async def echo(self, stream: Stream[bytes, bytes]) -> None:
        request = await stream.recv_message()
        assert request is not None
        await stream.send_message(request[::-1])

    def __mapping__(self) -> dict[str, Handler]:
        return {"/t.E/Echo": Handler(self.echo, Cardinality.UNARY_UNARY, bytes, bytes)}


class _Counted:
    """The real transport, counting the writes that reach it."""

    def __init__(self, transport: asyncio.BaseTransport, counts: list[int]) -> None:
        self._transport = transport
        self._counts = counts

    def write(self, data: bytes) -> None:
        self._counts[0] += 1
        self._transport.write(data)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _counting(protocol: asyncio.BaseProtocol, counts: list[int]) -> asyncio.BaseProtocol:
    made = protocol.connection_made

    def connection_made(transport: asyncio.BaseTransport) -> None:
        made(_Counted(transport, counts))  # type: ignore[arg-type]

    protocol.connection_made = connection_made  # type: ignore[method-assign]
    return protocol


@pytest.mark.parametrize("calls", [1, 200])
async def test_a_grpclib_server_behind_it_answers_concurrent_calls_in_fewer_writes(
    calls: int,
) -> None:
    server = Server([_Echo()], codec=_Raw())
    server_writes = [0]
    make_server = coalesced(server._protocol_factory)
    setattr(server, "_protocol_factory", lambda: _counting(make_server(), server_writes))  # noqa: B010
    await server.start("127.0.0.1", 0)
    assert server._server is not None
    port = server._server.sockets[0].getsockname()[1]
    channel = Channel("127.0.0.1", port, codec=_Raw())
    try:

        async def call(i: int) -> bytes:
            async with channel.request("/t.E/Echo", Cardinality.UNARY_UNARY, bytes, bytes) as s:
                await s.send_message(f"req-{i}".encode(), end=True)
                answer = await s.recv_message()
                assert answer is not None
                return answer

        answers = await asyncio.gather(*(call(i) for i in range(calls)))
        assert answers == [f"req-{i}".encode()[::-1] for i in range(calls)]
        # unbuffered, each answer is 3 writes and reading each request a window update more
        if calls > 1:
            assert server_writes[0] < calls
    finally:
        channel.close()
        server.close()
        await server.wait_closed()
