"""The drainer's gRPC call to a pump, ``binlog.Pump/PullBinlogs``, on grpclib.

grpclib is used as it is; what would make it slow for this one stream is left out:

- ``PullCodec`` passes the request through already marshalled and reads each
  ``PullBinlogResp`` with the one-pass ``wire.views`` reader, never a betterproto object;
- the flow-control windows are 16 MiB for the stream and the connection (grpclib's default is
  4 MiB), so a pump serving a backlog is not held back by WINDOW_UPDATE round trips, and the
  window is given back in fewer, larger updates;
- keepalive pings every ``KEEPALIVE`` seconds while the call is open, so a pump that vanished
  without closing its socket (a host gone, a partition) ends the call after
  ``KEEPALIVE_TIMEOUT`` instead of leaving the puller waiting forever.

Invariant: the call is over when ``pull_responses`` is: an exhausted or closed generator has
reset the stream (if the pump had not ended it) and closed the connection. The pump's
errors come out as grpclib's: ``GRPCError`` (a status other than OK), ``StreamTerminatedError``
(a reset, GOAWAY or lost connection), ``OSError`` (cannot connect); an unreadable response as
``MalformedMessage``.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncGenerator
from typing import Any, cast

from grpclib.client import Channel
from grpclib.config import Configuration
from grpclib.const import Cardinality
from grpclib.encoding.base import CodecBase
from grpclib.encoding.proto import ProtoCodec

from tributary.wire.binlog import PullBinlogReq, PullBinlogResp
from tributary.wire.views import PullBinlogRespView, parse_pull_response

PULL_PATH = "/binlog.Pump/PullBinlogs"
WINDOW = 16 << 20  # bytes a pump may send ahead of the drainer, per stream and connection
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


class PullCodec(ProtoCodec):
    """grpclib's protobuf codec, but bytes go out as they are (an already marshalled request)
    and ``PullBinlogResp`` comes in as a ``PullBinlogRespView``."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        if type(message) is bytes:
            return message
        return super().encode(message, message_type)

    def decode(self, data: bytes, message_type: Any) -> Any:
        if message_type is PullBinlogResp:
            return parse_pull_response(data)
        return super().decode(data, message_type)


async def pull_responses(
    host: str,
    port: int,
    request: PullBinlogReq,
    *,
    ssl_context: ssl.SSLContext | None = None,
    codec: CodecBase | None = None,
) -> AsyncGenerator[PullBinlogRespView, None]:
    """The pump's responses to ``request``, until it ends the call with status OK; ``codec``
    replaces ``PullCodec`` (the benchmark's ceiling reads raw bytes).

    Closing the generator early resets the stream (grpclib does so when the call is left
    with an exception, here ``GeneratorExit``, rather than waiting for the trailers)."""
    channel = Channel(host, port, ssl=ssl_context, codec=codec or PullCodec(), config=CONFIG)
    try:
        async with channel.request(
            PULL_PATH, Cardinality.UNARY_STREAM, bytes, PullBinlogResp
        ) as stream:
            await stream.send_message(bytes(request), end=True)
            while (resp := await stream.recv_message()) is not None:
                yield cast(PullBinlogRespView, resp)  # what PullCodec decodes
    finally:
        channel.close()
