"""One socket write per event-loop turn for a grpclib connection, however many frames it sends.

grpclib writes every HTTP/2 frame it makes straight to the transport: a unary answer is three
writes (HEADERS, DATA, trailing HEADERS) and reading a request adds a WINDOW_UPDATE, and on
uvloop each write to an idle socket is a ``send()`` system call. Under TiDB's pump client (64
writers on one connection) that was about a quarter of a bare grpclib server's CPU. A
:class:`WriteCoalescer` sits between grpclib and the transport: writes made during one turn of
the event loop are kept and go out together, as one write, from a callback scheduled at the
first of them (``loop.call_soon``: it runs once the callbacks already queued have run, before the
loop next waits for I/O).

Worked example: a turn answers 40 requests that came in one read: 120 frame writes and 40
window updates become one ``write`` of their bytes, in the order they were made.

Invariants: bytes reach the transport in the order they were written; nothing written before
``close()`` or ``write_eof()`` is dropped (both send what is kept first); ``abort()`` drops it,
as the transport's own ``abort`` drops its buffer; flow control is the transport's own (it calls
the protocol's ``pause_writing``/``resume_writing`` directly), and at most one turn's bytes are
kept here before the transport sees them.

Servers only. A client's requests wait for the end of the turn that made them, and the server
waits with them: the pump client with 512 writers in one process lost a third of its unary pace
and a tenth of its batched pace to the pump when its channels coalesced too
(``bench_pump_write``, docs/pump.md), where the same servers without it gained.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

ProtocolFactory = Callable[[], asyncio.BaseProtocol]


class WriteCoalescer:
    """A transport for grpclib's side of one connection; everything but writing is passed on."""

    __slots__ = ("_kept", "_loop", "_scheduled", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._kept: list[bytes] = []
        self._scheduled = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        self._kept.append(bytes(data))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Send what is kept now (the scheduled callback; also before close and EOF)."""
        self._scheduled = False
        kept = self._kept
        if not kept:
            return
        self._kept = []
        if self._transport.is_closing():
            return  # the transport would drop it too, with a warning per write
        self._transport.write(kept[0] if len(kept) == 1 else b"".join(kept))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._kept = []
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._kept))

    def __getattr__(self, name: str) -> Any:
        # is_closing, get_extra_info, pause_reading, set_protocol ...: the transport's own
        return getattr(self._transport, name)


def coalescing(protocol: asyncio.BaseProtocol) -> asyncio.BaseProtocol:
    """``protocol`` (grpclib's ``H2Protocol``), made to get its transport behind a
    :class:`WriteCoalescer`; the transport keeps calling it directly for everything else."""
    made = protocol.connection_made

    def connection_made(transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        made(cast(asyncio.Transport, WriteCoalescer(cast(asyncio.Transport, transport), loop)))

    protocol.connection_made = connection_made  # type: ignore[method-assign]
    return protocol


def coalesced(factory: ProtocolFactory) -> ProtocolFactory:
    """``factory``'s protocols (a grpclib ``Server``'s), each made :func:`coalescing`."""

    def make() -> asyncio.BaseProtocol:
        return coalescing(factory())

    return make
