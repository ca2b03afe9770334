"""A lean gRPC client for the one call the drainer streams: ``binlog.Pump/PullBinlogs``.

The general client (grpclib on h2) spends more CPU per message than decoding the rows it
carries: an event object, a state machine step and a ``repr`` of every frame. This one speaks
just the HTTP/2 (RFC 9113) a single client stream needs: the preface and SETTINGS, one
HEADERS + DATA request (``END_STREAM``), then DATA frames carrying length-prefixed gRPC
messages and a trailing HEADERS with ``grpc-status``. Header blocks go through ``hpack`` (the
dynamic table must follow every block); PING is answered at once; SETTINGS acknowledged;
RST_STREAM, GOAWAY with an error, a non-zero ``grpc-status`` or a lost connection end the
stream with a ``PullStreamError`` (the puller reconnects from its last commit ts).

Invariant (flow control): whole messages hold their window until the consumer takes them, so
at most ``window`` bytes of them wait, plus the one message being received, whose bytes are
given back as they arrive (a message bigger than the window still completes). Window goes
back in WINDOW_UPDATEs on the stream and the connection once half a window is owed; a slow
consumer slows the pump down, and frames are still read, so PINGs are answered meanwhile.

Worked example: with ``window`` 4 MiB the client sends SETTINGS(INITIAL_WINDOW_SIZE=4 MiB)
and WINDOW_UPDATE(stream 0, 4 MiB - 65535); after the consumer took messages of 2 MiB in all
(5-byte prefixes counted), it sends WINDOW_UPDATE(stream 1, 2 MiB) and (stream 0, 2 MiB).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections import deque
from collections.abc import AsyncGenerator
from typing import cast
from urllib.parse import unquote

import hpack

from tributary.errors import TributaryError
from tributary.net import join_host_port

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
WINDOW = 4 << 20  # bytes the pump may send ahead of the consumer
MAX_FRAME = 1 << 20  # largest frame payload we accept (SETTINGS_MAX_FRAME_SIZE)
DEFAULT_WINDOW = 65_535
_DATA, _HEADERS, _RST, _SETTINGS, _PING, _GOAWAY = 0, 1, 3, 4, 6, 7
_WINDOW_UPDATE, _CONTINUATION = 8, 9
_END_STREAM, _ACK, _END_HEADERS, _PADDED, _PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
_HEADER = struct.Struct(">BHBBI")  # length (24 bits as 8 + 16), type, flags, stream id
_SETTING = struct.Struct(">HI")
_STREAM = 1  # the one stream this client opens


class PullStreamError(TributaryError):
    """The stream ended abnormally (connection lost, reset, error status); the puller reconnects."""

    retriable = True


def frame(ftype: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    n = len(payload)
    return _HEADER.pack(n >> 16, n & 0xFFFF, ftype, flags, stream) + payload


def grpc_message(body: bytes) -> bytes:
    """A gRPC length-prefixed message, uncompressed."""
    return b"\0" + len(body).to_bytes(4, "big") + body


class _Connection(asyncio.Protocol):
    """Reads frames as they arrive and queues the stream's gRPC messages for ``messages``."""

    def __init__(self, request_headers: list[tuple[str, str]], request: bytes, window: int):
        self._request_headers = request_headers
        self._request = request
        self._window = window
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()  # unparsed frames
        self._data = bytearray()  # stream bytes not yet a whole gRPC message
        self._block = bytearray()  # a header block waiting for its CONTINUATION frames
        self._block_ends_stream = False
        self._block_stream = 0
        self._decoder = hpack.Decoder()
        self._headers_seen = False
        self._early = 0  # bytes of the partial message in ``_data`` already given back
        self.messages: deque[tuple[bytes, int]] = deque()  # and the window it holds
        self.error: PullStreamError | None = None
        self.ended = False  # trailers with grpc-status 0 arrived
        self.wake = asyncio.Event()
        self._owed = 0  # window bytes taken by the consumer, not yet given back

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's too
        settings = _SETTING.pack(0x2, 0) + _SETTING.pack(0x4, self._window)  # no push; window
        settings += _SETTING.pack(0x5, MAX_FRAME)
        block = hpack.Encoder().encode(self._request_headers)
        more = self._window - DEFAULT_WINDOW  # the connection window starts at the default
        transport.write(
            PREFACE
            + frame(_SETTINGS, 0, 0, settings)
            + (frame(_WINDOW_UPDATE, 0, 0, more.to_bytes(4, "big")) if more > 0 else b"")
            + frame(_HEADERS, _END_HEADERS, _STREAM, block)
            + frame(_DATA, _END_STREAM, _STREAM, grpc_message(self._request))
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"connection lost: {exc!r}" if exc else "connection closed")

    def _fail(self, why: str) -> None:
        if self.error is None and not self.ended:
            self.error = PullStreamError(why)
        self.wake.set()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def taken(self, size: int) -> None:
        """``size`` bytes of window are no longer held (a message was taken, padding or part
        of a message was read): give them back once half a window is owed."""
        self._owed += size
        t = self._transport
        if self._owed >= self._window // 2 and t is not None and not t.is_closing():
            inc = self._owed.to_bytes(4, "big")
            t.write(frame(_WINDOW_UPDATE, 0, _STREAM, inc) + frame(_WINDOW_UPDATE, 0, 0, inc))
            self._owed = 0

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos, end = 0, len(buf)
        try:
            while end - pos >= 9:
                hi, lo, ftype, flags, stream = _HEADER.unpack_from(buf, pos)
                size = hi << 16 | lo
                if size > MAX_FRAME:
                    raise PullStreamError(f"frame of {size} bytes exceeds {MAX_FRAME}")
                if end - pos - 9 < size:
                    break
                payload = bytes(buf[pos + 9 : pos + 9 + size])
                pos += 9 + size
                self._frame(ftype, flags, stream & 0x7FFFFFFF, payload)
        except (PullStreamError, struct.error, IndexError) as e:  # the latter: short frames
            self._fail(str(e) or repr(e))
            self.close()
            return
        finally:
            del buf[:pos]
        self.wake.set()

    def _frame(self, ftype: int, flags: int, stream: int, payload: bytes) -> None:
        if ftype == _DATA:
            if stream == _STREAM:
                self._on_data(flags, payload)
        elif ftype == _HEADERS or ftype == _CONTINUATION:
            self._on_headers(ftype, flags, stream, payload)
        elif ftype == _PING:
            if not flags & _ACK and self._transport is not None:
                self._transport.write(frame(_PING, _ACK, 0, payload))
        elif ftype == _SETTINGS:
            if not flags & _ACK and self._transport is not None:
                self._transport.write(frame(_SETTINGS, _ACK, 0))
        elif ftype == _RST and stream == _STREAM:
            code = int.from_bytes(payload[:4], "big")
            raise PullStreamError(f"the pump reset the stream (HTTP/2 error {code})")
        elif ftype == _GOAWAY:
            last, code = struct.unpack_from(">II", payload)
            if code or (last & 0x7FFFFFFF) < _STREAM:
                raise PullStreamError(f"the pump is going away (HTTP/2 error {code})")
        # WINDOW_UPDATE, PRIORITY and unknown types need nothing from a receiving client.

    def _on_data(self, flags: int, payload: bytes) -> None:
        if flags & _PADDED:
            pad = payload[0] + 1
            self.taken(pad)  # padding is counted by flow control but never consumed
            payload = payload[1 : len(payload) - payload[0]]
        data = self._data
        buf: bytes | bytearray = payload  # the common case: messages start at the frame
        if data:
            data += payload
            buf = data
        pos, end = 0, len(buf)
        early = self._early  # given back already: the start of the first message below
        while end - pos >= 5:
            size = int.from_bytes(buf[pos + 1 : pos + 5], "big")
            if end - pos - 5 < size:
                break
            if buf[pos]:
                raise PullStreamError("the pump sent a compressed message")
            self.messages.append((bytes(buf[pos + 5 : pos + 5 + size]), 5 + size - early))
            early = 0
            pos += 5 + size
        if buf is data:
            del data[:pos]
        else:
            data += payload[pos:]
        # A partial message's bytes are given back at once: one bigger than the window completes.
        rest = end - pos
        if rest > early:
            self.taken(rest - early)
        self._early = rest
        if flags & _END_STREAM:
            raise PullStreamError("the stream ended without trailers")

    def _on_headers(self, ftype: int, flags: int, stream: int, payload: bytes) -> None:
        if ftype == _HEADERS:
            if flags & _PADDED:
                payload = payload[1 : len(payload) - payload[0]]
            if flags & _PRIORITY:
                payload = payload[5:]
            self._block_ends_stream = bool(flags & _END_STREAM)
            self._block_stream = stream
            self._block[:] = payload
        else:
            self._block += payload
        if not flags & _END_HEADERS:
            return
        try:
            headers = dict(self._decoder.decode(bytes(self._block), raw=True))
        except hpack.HPACKError as e:
            raise PullStreamError(f"undecodable headers: {e}") from e
        self._block.clear()
        if self._block_stream != _STREAM:
            return  # decoded all the same: the dynamic table follows every block
        first, self._headers_seen = not self._headers_seen, True
        status = headers.get(b":status")
        if first and status is not None and status != b"200":
            raise PullStreamError(
                f"the pump answered HTTP status {status.decode(errors='replace')}"
            )
        grpc_status = headers.get(b"grpc-status")
        if grpc_status is not None:
            if grpc_status != b"0":
                why = unquote(headers.get(b"grpc-message", b"").decode(errors="replace"))
                raise PullStreamError(f"grpc status {grpc_status.decode(errors='replace')}: {why}")
            self.ended = True
        elif self._block_ends_stream:
            raise PullStreamError("the stream ended without a grpc-status")


async def pull_messages(
    host: str,
    port: int,
    path: str,
    request: bytes,
    *,
    ssl_context: ssl.SSLContext | None = None,
    window: int = WINDOW,
) -> AsyncGenerator[bytes, None]:
    """The response messages of the server-streaming call ``path`` with ``request``; ends
    when the server ends the call with status OK, raises ``PullStreamError`` otherwise.
    Closing the generator closes the connection."""
    headers = [
        (":method", "POST"),
        (":scheme", "https" if ssl_context else "http"),
        (":path", path),
        (":authority", join_host_port(host, port)),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    loop = asyncio.get_running_loop()
    try:
        _, conn = await loop.create_connection(
            lambda: _Connection(headers, request, window), host, port, ssl=ssl_context
        )
    except OSError as e:
        raise PullStreamError(f"cannot connect to {host}:{port}: {e}") from e
    try:
        messages = conn.messages
        while True:
            while messages:
                message, held = messages.popleft()
                conn.taken(held)
                yield message
            if conn.error is not None:
                raise conn.error
            if conn.ended:
                return
            conn.wake.clear()
            await conn.wake.wait()
    finally:
        conn.close()
