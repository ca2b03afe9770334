"""The drainer's gRPC call to a pump, ``binlog.Pump/PullBinlogs``, on grpclib.

grpclib opens the call, sends the request, reads the headers and trailers, keeps the
connection alive and hands errors out as usual; what would make it slow for this one stream
is left out:

- the responses are read as they arrive, not one ``recv_message`` per response:
  ``pull_messages`` takes the DATA chunks the stream has received at each wakeup (up to
  ``TAKE`` bytes of them), cuts the length-prefixed gRPC messages out of them and yields them
  as one list of raw ``PullBinlogResp`` bytes (the puller reads each with the one-pass
  ``wire.views`` reader); grpclib's per-message path (two buffer reads, a window update per
  chunk, event hooks) cost about as much as decoding the binlog. The window goes back once
  per wakeup for the chunks taken, as grpclib gives it back per chunk read: at most the
  window and one batch are held per stream, as with grpclib the window and one chunk;
- the request goes out already marshalled (``RequestCodec``);
- the flow-control windows are 16 MiB for the stream and the connection (grpclib's default is
  4 MiB), so a pump serving a backlog is not held back by WINDOW_UPDATE round trips;
- keepalive pings every ``KEEPALIVE`` seconds while the call is open, so a pump that vanished
  without closing its socket (a host gone, a partition) ends the call after
  ``KEEPALIVE_TIMEOUT`` instead of leaving the puller waiting forever.

grpclib has no public call for "what has arrived"; ``pull_messages`` reads the stream's
``protocol.Buffer`` queue (grpclib 0.4) in place of ``Buffer.read``, under the call's
``Wrapper`` as ``recv_message`` does, so a lost connection, GOAWAY or reset still ends the
wait with ``StreamTerminatedError``. grpclib's ``RecvMessage`` event is not dispatched (the
drainer listens to none).

Invariant: the call is over when ``pull_messages`` is: an exhausted or closed generator has
reset the stream (if the pump had not ended it) and closed the connection. Messages come out
whole, in order, each once; a stream that ends inside a message or carries a compressed one
raises ``grpclib.exceptions.ProtocolError``. The pump's errors come out as grpclib's:
``GRPCError`` (a status other than OK), ``StreamTerminatedError`` (a reset, GOAWAY or lost
connection), ``OSError`` (cannot connect).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from grpclib.client import Channel, Stream
from grpclib.config import Configuration
from grpclib.const import Cardinality
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import ProtocolError

from tributary.wire.binlog import PullBinlogReq

PULL_PATH = "/binlog.Pump/PullBinlogs"
WINDOW = 16 << 20  # bytes a pump may send ahead of the drainer, per stream and connection
TAKE = 256 << 10  # bytes taken off the stream per wakeup, at most (or one chunk)
KEEPALIVE = 30.0  # seconds between pings while the call is open
KEEPALIVE_TIMEOUT = 20.0  # seconds a ping may go unanswered before the connection is closed

CONFIG = Configuration(
    http2_connection_window_size=WINDOW,
    http2_stream_window_size=WINDOW,
    _keepalive_time=KEEPALIVE,
    _keepalive_timeout=KEEPALIVE_TIMEOUT,
    _http2_max_pings_without_data=0,  # the drainer sends nothing after its request
    _http2_min_sent_ping_interval_without_data=KEEPALIVE,
)


class RequestCodec(ProtoCodec):
    """grpclib's protobuf codec, but bytes go out as they are (an already marshalled request);
    responses never go through a codec here."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        if type(message) is bytes:
            return message
        return super().encode(message, message_type)


class Deframer:
    """Cuts gRPC messages (flag byte, 4-byte big-endian length, message) out of stream bytes.

    Bytes of a message not yet whole wait as chunks and are joined once it is (a message of
    many MiB is copied once, not once per chunk). Worked example: ``abc`` and ``defghi`` framed
    are ``00 00000003 abc`` (8 bytes) and ``00 00000006 defghi`` (11 bytes). Fed chunks of the
    first 10 and next 5 bytes, it gives ``[abc]`` and keeps ``00 00000006 de`` (7 bytes, 11
    needed); fed 2 more bytes it gives nothing (9 < 11, nothing joined); fed the last 2, it
    gives ``[defghi]``."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._have = 0  # bytes in _chunks
        self._need = 5  # bytes _chunks must hold before the next message can be cut

    @property
    def empty(self) -> bool:
        return not self._have

    def feed(self, chunks: list[bytes]) -> list[bytes]:
        """The messages completed by ``chunks``, in order."""
        self._chunks += chunks
        self._have += sum(map(len, chunks))
        if self._have < self._need:
            return []
        buf = b"".join(self._chunks)
        pos, end = 0, len(buf)
        out = []
        while end - pos >= 5:
            if buf[pos]:
                raise ProtocolError("the pump sent a compressed message")
            stop = pos + 5 + int.from_bytes(buf[pos + 1 : pos + 5], "big")
            if stop > end:
                self._need = stop - pos
                break
            out.append(buf[pos + 5 : stop])
            pos = stop
        else:
            self._need = 5
        self._chunks = [buf[pos:]] if pos < end else []
        self._have = end - pos
        return out


async def _batches(stream: Stream[Any, Any]) -> AsyncGenerator[list[bytes], None]:
    """The stream's messages, as many as have arrived at each wakeup (never an empty list),
    until the pump ends the stream."""
    await stream.recv_initial_metadata()
    h2_stream = stream._stream
    stream_id = h2_stream.id
    assert stream_id is not None  # the request was sent
    queue = h2_stream.buffer._unacked  # (data, size, flow-controlled size); size 0: the end
    connection = h2_stream.connection
    wrapper = stream._wrapper
    deframer = Deframer()
    ended = False
    while not ended:
        if queue.empty():
            with wrapper:
                chunk = await queue.get()
        else:
            chunk = queue.get_nowait()
        data, size, taken = [], 0, 0
        while True:
            if not chunk.ack_size:  # the end of the stream (trailers follow)
                ended = True
                break
            data.append(chunk.data)
            size += chunk.data_size
            taken += chunk.ack_size
            if size >= TAKE or queue.empty():
                break
            chunk = queue.get_nowait()
        connection.ack(stream_id, taken)
        messages = deframer.feed(data)
        if messages:
            stream._messages_received += len(messages)
            connection.messages_received += len(messages)
            connection.last_message_received = time.monotonic()
            yield messages
    if not deframer.empty:
        raise ProtocolError("the pump ended the stream inside a message")


async def pull_messages(
    host: str,
    port: int,
    request: PullBinlogReq,
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncGenerator[list[bytes], None]:
    """The pump's responses to ``request`` (marshalled ``PullBinlogResp``s), a list of those
    that arrived together at a time, until it ends the call with status OK.

    Closing the generator early resets the stream (grpclib does so when the call is left
    with an exception, here ``GeneratorExit``, rather than waiting for the trailers)."""
    channel = Channel(host, port, ssl=ssl_context, codec=RequestCodec(), config=CONFIG)
    try:
        async with channel.request(PULL_PATH, Cardinality.UNARY_STREAM, bytes, bytes) as stream:
            await stream.send_message(bytes(request), end=True)
            async with aclosing(_batches(stream)) as batches:
                async for batch in batches:
                    yield batch
    finally:
        channel.close()
