"""etcd's client API relayed over another gRPC port, byte for byte, as PD's port serves it.

PD embeds etcd and answers both ``pdpb.PD`` and etcd's ``KV``/``Watch``/``Lease`` on one URL,
and TiDB's pump client relies on that: it gives the same URLs to a PD client (for the cluster
ID) and to an etcd client (for the pump registry). In standalone mode our TSO's port answers
``pdpb.PD``; with this relay on the same gRPC server it also answers etcd's calls by passing
each message, undecoded, to the etcd the TSO itself uses. So a PD-speaking client given the
TSO's address alone works against a standalone cluster.

Invariant: messages are never decoded or changed; a call ends the same way upstream ended it
(the upstream gRPC status is the relayed call's status); a relayed stream's two directions
end together, leaving no task behind. ``Cluster``/``MemberList`` is not relayed on purpose: a
client syncing its endpoints from it would leave this port for etcd's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import ProtocolError, StreamTerminatedError
from grpclib.server import Stream

UNARY = (
    "/etcdserverpb.KV/Range",
    "/etcdserverpb.KV/Put",
    "/etcdserverpb.KV/DeleteRange",
    "/etcdserverpb.KV/Txn",
    "/etcdserverpb.KV/Compact",
    "/etcdserverpb.Lease/LeaseGrant",
    "/etcdserverpb.Lease/LeaseRevoke",
    "/etcdserverpb.Lease/LeaseTimeToLive",
    "/etcdserverpb.Lease/LeaseLeases",
    "/etcdserverpb.Maintenance/Status",
)
STREAMS = ("/etcdserverpb.Watch/Watch", "/etcdserverpb.Lease/LeaseKeepAlive")
_HOP_HEADERS = ("te", "content-type", "user-agent", "grpc-timeout", "grpc-encoding")


class RawMessage:
    """A message as bytes: what grpclib's protobuf codec needs, without the decoding."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    @classmethod
    def FromString(cls, data: bytes) -> RawMessage:
        return cls(data)

    def SerializeToString(self) -> bytes:
        return self.data


def _endpoint(url: str) -> tuple[str, int]:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"bad etcd endpoint {url!r}")
    return parts.hostname, parts.port


class EtcdRelay:
    """A grpclib handler set (``Server([..., EtcdRelay(urls)])``); ``close()`` on shutdown."""

    def __init__(self, etcd_urls: Sequence[str], *, ssl_context: ssl.SSLContext | None = None):
        if not etcd_urls:
            raise ValueError("the etcd relay needs at least one etcd endpoint")
        self._endpoints = [_endpoint(url) for url in etcd_urls]
        self._ssl = ssl_context
        self._next = 0
        self._channel: Channel | None = None

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _upstream(self) -> Channel:
        if self._channel is None:
            host, port = self._endpoints[self._next % len(self._endpoints)]
            self._channel = Channel(host, port, ssl=self._ssl)
        return self._channel

    def _failed(self, channel: Channel) -> None:
        """The connection to this etcd broke: the next call tries the next endpoint."""
        if self._channel is channel:
            self.close()
            self._next += 1

    def __mapping__(self) -> dict[str, Handler]:
        mapping = {
            path: Handler(
                self._unary_handler(path), Cardinality.UNARY_UNARY, RawMessage, RawMessage
            )
            for path in UNARY
        }
        for path in STREAMS:
            mapping[path] = Handler(
                self._stream_handler(path), Cardinality.STREAM_STREAM, RawMessage, RawMessage
            )
        return mapping

    def _unary_handler(self, path: str) -> Any:
        async def handle(stream: Stream[RawMessage, RawMessage]) -> None:
            request = await stream.recv_message()
            if request is None:
                raise GRPCError(Status.INVALID_ARGUMENT, "no request message")
            channel = self._upstream()
            try:
                async with channel.request(
                    path,
                    Cardinality.UNARY_UNARY,
                    RawMessage,
                    RawMessage,
                    deadline=stream.deadline,
                    metadata=forwarded_metadata(stream.metadata),
                ) as upstream:
                    await upstream.send_message(request, end=True)
                    reply = await upstream.recv_message()
            except (StreamTerminatedError, ProtocolError, OSError) as e:
                self._failed(channel)
                raise GRPCError(Status.UNAVAILABLE, f"etcd unreachable: {e!r}") from e
            if reply is None:
                raise GRPCError(Status.UNAVAILABLE, "etcd ended the call without a reply")
            await stream.send_message(reply)

        return handle

    def _stream_handler(self, path: str) -> Any:
        async def handle(stream: Stream[RawMessage, RawMessage]) -> None:
            channel = self._upstream()
            try:
                async with channel.request(
                    path,
                    Cardinality.STREAM_STREAM,
                    RawMessage,
                    RawMessage,
                    metadata=forwarded_metadata(stream.metadata),
                ) as upstream:
                    await upstream.send_request()
                    await _pipe_both(stream, upstream)
            except (StreamTerminatedError, ProtocolError, OSError) as e:
                self._failed(channel)
                raise GRPCError(Status.UNAVAILABLE, f"etcd unreachable: {e!r}") from e

        return handle


async def _pipe_both(downstream: Any, upstream: Any) -> None:
    """Copy messages both ways until the upstream ends; then stop copying the other way."""

    async def to_upstream() -> None:
        async for message in downstream:
            await upstream.send_message(message)
        await upstream.end()

    async def to_downstream() -> None:
        while (message := await upstream.recv_message()) is not None:
            await downstream.send_message(message)

    sending = asyncio.create_task(to_upstream(), name="etcd-relay-up")
    try:
        await to_downstream()
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sending


def forwarded_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if not metadata:
        return {}
    return {
        k: v
        for k, v in metadata.items()
        if not k.startswith((":", "grpc-")) and k not in _HOP_HEADERS
    }
