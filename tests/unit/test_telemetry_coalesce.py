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

from tributary.telemetry.coalesce import Coalescing, WriteCoalescer, coalesced


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


@pytest.mark.parametrize("calls", [1, 200])
async def test_a_grpclib_server_behind_it_answers_concurrent_calls_with_fewer_writes(
    calls: int,
) -> None:
    server = Server([_Echo()], codec=_Raw())
    writes = 0
    make = coalesced(server._protocol_factory)

    def counting() -> asyncio.BaseProtocol:
        protocol = make()
        assert isinstance(protocol, Coalescing)
        return _CountingWrites(protocol)

    class _CountingWrites(asyncio.Protocol):
        def __init__(self, inner: Coalescing) -> None:
            self.inner = inner

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            real_write = transport.write  # type: ignore[attr-defined]

            class _Counted:
                def __getattr__(self, name: str) -> Any:
                    return getattr(transport, name)

                def write(self, data: bytes) -> None:
                    nonlocal writes
                    writes += 1
                    real_write(data)

            self.inner.connection_made(_Counted())  # type: ignore[arg-type]

        def data_received(self, data: bytes) -> None:
            self.inner.data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.inner.connection_lost(exc)

    server._protocol_factory = counting  # type: ignore[method-assign]
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
        # unbuffered, each answer is 3 writes and each request's data one window update more
        if calls > 1:
            assert writes < calls
    finally:
        channel.close()
        server.close()
        await server.wait_closed()
