"""The grpclib ``Server`` every gRPC port of ours runs (pump and its fronts, drainer, TSO), with
grpclib's early error replies made replies that grpc-go reads.

grpclib 0.4 answers some requests before any handler runs: ``grpclib.server.request_handler``
calls ``_abort`` for a method or service it does not serve (UNIMPLEMENTED), an invalid
``grpc-timeout`` (UNKNOWN) and requests that are not gRPC at all (405, 415, 400). ``_abort``
sends ``:status``, ``grpc-status`` and ``grpc-message`` and no ``content-type``, which gRPC's
HTTP/2 protocol requires in a Trailers-Only reply. grpc-go (TiDB's pump client, PD's client, a
Go drainer) checks it before it reads grpc-status: it reported every unknown method as UNKNOWN
"malformed header: missing HTTP content-type". grpclib's own client reads grpc-status first,
which is why our tests never saw it.

:func:`grpc_server` builds the ``Server`` and replaces ``grpclib.server._abort`` (once per
process) with :func:`abort`: the same reply with ``content-type: application/grpc`` whenever
``:status`` is 200, as grpc-go's and tonic's servers send it. ``request_handler`` looks
``_abort`` up as a module global when it aborts, so every server in the process gets it; a
successful request never reaches it and costs what it did. Before replacing, the grpclib
installed is checked to be the one this was written against (``_abort``'s parameters, and
``request_handler`` calling it by that name); if not, nothing is replaced and a warning says
so (the unit test fails too).

A request message that cannot be decoded used to end in grpclib's "Application error" log (a
traceback per request) and UNKNOWN "Internal Server Error"; our servers' codec
(:class:`ServerProtoCodec`, ``pump.pullwire.PumpCodec`` builds on it) answers it INTERNAL, as
grpc-go's servers (a Go pump, PD) do, without a traceback. Decoding a valid message costs what
it did (a ``try`` costs nothing until something is raised).

Invariant: every reply of our gRPC servers that carries ``:status 200`` carries a gRPC
``content-type``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import grpclib.server
from grpclib.const import Status
from grpclib.encoding.base import GRPC_CONTENT_TYPE, CodecBase
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError
from grpclib.metadata import encode_grpc_message
from grpclib.protocol import Stream as H2Stream
from grpclib.server import Server

log = logging.getLogger(__name__)

_ABORT_PARAMETERS = ("h2_stream", "h2_status", "grpc_status", "grpc_message")


async def abort(
    h2_stream: H2Stream,
    h2_status: int,
    grpc_status: Status | None = None,
    grpc_message: str | None = None,
) -> None:
    """grpclib's ``_abort`` with a gRPC ``content-type`` on a ``:status 200`` reply."""
    headers = [(":status", str(h2_status))]
    if h2_status == 200:  # a Trailers-Only gRPC reply
        headers.append(("content-type", GRPC_CONTENT_TYPE))
    if grpc_status is not None:
        headers.append(("grpc-status", str(grpc_status.value)))
    if grpc_message is not None:
        headers.append(("grpc-message", encode_grpc_message(grpc_message)))
    await h2_stream.send_headers(headers, end_stream=True)
    if h2_stream.closable:
        h2_stream.reset_nowait()


def install_abort() -> bool:
    """Make grpclib's servers in this process abort with :func:`abort`; whether they do."""
    current = grpclib.server._abort
    if current is abort:
        return True
    code = current.__code__
    calls = grpclib.server.request_handler.__code__.co_names
    if code.co_varnames[: code.co_argcount] != _ABORT_PARAMETERS or "_abort" not in calls:
        log.warning(
            "grpclib %s: its server aborts differently than expected; its error replies are "
            "left as they are (grpc-go may see UNKNOWN for an unknown method)",
            getattr(grpclib, "__version__", "?"),
        )
        return False
    grpclib.server._abort = abort
    return True


def grpc_server(handlers: Collection[object], *, codec: CodecBase | None = None) -> Server:
    """A grpclib ``Server`` for ``handlers`` (with ``codec``, by default
    :class:`ServerProtoCodec`) whose error replies grpc-go reads (:func:`install_abort`)."""
    install_abort()
    return Server(handlers, codec=codec or ServerProtoCodec())  # type: ignore[arg-type]


class ServerProtoCodec(ProtoCodec):
    """grpclib's protobuf codec, for a server: a request it cannot decode is answered INTERNAL."""

    def decode(self, data: bytes, message_type: Any) -> Any:
        try:
            return message_type.FromString(data)
        except Exception as e:  # betterproto's decoders raise RuntimeError, ValueError ...
            raise undecodable(e) from e


def undecodable(error: Exception) -> GRPCError:
    """The reply to a request message that cannot be decoded: INTERNAL, as grpc-go's servers
    answer it (``grpc: error unmarshalling request``)."""
    return GRPCError(Status.INTERNAL, f"cannot decode the request: {error}")
