"""PD's side of the ``Tso`` port: cluster ID and timestamps from a PD (``pdpb.PD``).

``probe_pd`` asks each URL for ``GetMembers`` the way PD's Go client starts: a URL that
answers gives the cluster ID; plain etcd answers UNIMPLEMENTED. ``PdClient`` is the ``Tso``
port over PD: it keeps one ``Tso`` stream to the leader, coalesces concurrent ``get_ts()``
calls into one request with ``count = N`` (one request in flight; callers arriving during it
form the next batch; see ``batching``) and, when the stream fails, asks ``GetMembers`` for
the leader again, over every member URL PD gave it (PD's client also learns its URL list
this way).

Invariant: a batch's callers get the ``count`` consecutive timestamps ending at the reply's
``logical`` (PD sends the last one), in arrival order; a reply that would go back below the
last timestamp handed out is refused, so this client never hands out a smaller timestamp.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from tributary.tso.batching import BatchTexts, Retry, TimestampBatcher
from tributary.tso.errors import TsoError
from tributary.wire import ts
from tributary.wire.pdpb import (
    GetMembersRequest,
    GetMembersResponse,
    PdStub,
    RequestHeader,
    TsoRequest,
    TsoResponse,
)

log = logging.getLogger(__name__)

_PROBE_TIMEOUT = 3.0
_NETWORK_ERRORS = (StreamTerminatedError, ProtocolError, OSError, TimeoutError)


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"bad PD URL {url!r}")
    return parts.hostname, parts.port


async def get_members(
    url: str, *, ssl_context: ssl.SSLContext | None = None, limit_s: float = _PROBE_TIMEOUT
) -> GetMembersResponse:
    """One ``GetMembers`` call; raises GRPCError or a network error as grpclib does."""
    host, port = _host_port(url)
    channel = Channel(host, port, ssl=ssl_context)
    try:
        return await PdStub(channel).get_members(GetMembersRequest(), timeout=limit_s)
    finally:
        channel.close()


async def probe_pd(urls: Sequence[str], *, ssl_context: ssl.SSLContext | None = None) -> int | None:
    """PD's cluster ID when some URL answers ``pdpb.PD/GetMembers``; None when none does.

    Raises TsoError(retriable=False) when two URLs answer with different cluster IDs.
    """
    found: dict[int, str] = {}
    for url in urls:
        try:
            reply = await get_members(url, ssl_context=ssl_context)
        except (GRPCError, *_NETWORK_ERRORS, ValueError) as e:
            log.debug("%s does not answer pdpb.PD/GetMembers: %r", url, e)
            continue
        if reply.header is not None and reply.header.cluster_id:
            found[reply.header.cluster_id] = url
    if len(found) > 1:
        raise TsoError(f"PD URLs disagree on the cluster ID: {found}", retriable=False)
    return next(iter(found), None)


_TEXTS = BatchTexts(
    expired="no timestamp from PD in time",
    timed_out="timed out waiting for a timestamp from PD",
    closed="PD client closed",
)


class PdClient:
    """The ``Tso`` port over PD's ``Tso`` stream. Async context manager.

    ``timeout`` (s) bounds each ``get_ts()``; past it, TsoError(retriable=True). A wrong
    cluster ID raises TsoError(retriable=False).
    """

    def __init__(
        self,
        urls: Sequence[str],
        cluster_id: int,
        *,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if not urls:
            raise ValueError("PdClient needs at least one PD URL")
        self._urls = list(urls)
        self._cluster_id = cluster_id
        self._timeout = timeout
        self._ssl = ssl_context
        self._channel: Channel | None = None
        self._stream: Any = None
        self._stream_cm: Any = None
        self._last = 0
        self._batcher = TimestampBatcher(
            self._request, _TEXTS, task_name="pd-client-flush", on_error=self._close_stream
        )

    async def __aenter__(self) -> PdClient:
        await self._batcher.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._batcher.__aexit__(exc_type, exc, tb)
        await self._close_stream()

    async def get_ts(self) -> int:
        if not self._batcher.running:
            raise RuntimeError("PdClient not entered")
        return await self._batcher.get(asyncio.get_running_loop().time() + self._timeout)

    # -- requests ---------------------------------------------------------

    async def _request(self, count: int, deadline: float) -> int:
        del deadline  # each reply on the stream is bounded by its own wait
        stream = await self._leader_stream()
        request = TsoRequest(header=RequestHeader(cluster_id=self._cluster_id), count=count)
        try:
            await stream.send_message(request)
            reply: TsoResponse | None = await asyncio.wait_for(stream.recv_message(), 5.0)
        except GRPCError as e:
            if e.status is Status.FAILED_PRECONDITION:
                raise TsoError(f"PD refused the request: {e.message}", retriable=False) from e
            raise Retry(f"{e.status.name}: {e.message}") from e
        except _NETWORK_ERRORS as e:
            raise Retry(repr(e)) from e
        if reply is None or reply.timestamp is None:
            raise Retry("PD ended the Tso stream")
        if reply.count != count:
            raise Retry(f"PD answered {reply.count} timestamps for {count}")
        last = ts.compose(reply.timestamp.physical, reply.timestamp.logical)
        if last - count + 1 <= self._last:
            raise Retry(f"PD's timestamp {last} went back below {self._last}")
        self._last = last
        return last

    # -- leader -----------------------------------------------------------

    async def _leader_stream(self) -> Any:
        if self._stream is not None:
            return self._stream
        leader = await self._find_leader()
        host, port = _host_port(leader)
        self._channel = Channel(host, port, ssl=self._ssl)
        self._stream_cm = self._channel.request(
            "/pdpb.PD/Tso", Cardinality.STREAM_STREAM, TsoRequest, TsoResponse
        )
        try:
            self._stream = await self._stream_cm.__aenter__()
            await self._stream.send_request()
        except _NETWORK_ERRORS as e:
            await self._close_stream()
            raise Retry(f"cannot open a Tso stream to {leader}: {e!r}") from e
        log.info("PD client: Tso stream open to the leader %s", leader)
        return self._stream

    async def _find_leader(self) -> str:
        errors: list[str] = []
        for url in list(self._urls):
            try:
                reply = await get_members(url, ssl_context=self._ssl)
            except (GRPCError, *_NETWORK_ERRORS, ValueError) as e:
                errors.append(f"{url}: {e!r}")
                continue
            if reply.header is not None and reply.header.cluster_id != self._cluster_id:
                raise TsoError(
                    f"PD at {url} serves cluster {reply.header.cluster_id}, not {self._cluster_id}",
                    retriable=False,
                )
            member_urls = [u for m in reply.members for u in m.client_urls]
            # PD's client replaces its list; we keep the URLs we were given as a fallback
            self._urls = list(dict.fromkeys([*member_urls, *self._urls]))
            if reply.leader is not None and reply.leader.client_urls:
                return str(reply.leader.client_urls[0])
            errors.append(f"{url}: no leader")
        raise Retry(f"no PD leader found: {'; '.join(errors)}")

    async def _close_stream(self) -> None:
        cm, self._stream_cm, self._stream = self._stream_cm, None, None
        try:
            if cm is not None:
                await cm.__aexit__(None, None, None)
        except (GRPCError, *_NETWORK_ERRORS):
            pass
        finally:
            if self._channel is not None:
                self._channel.close()
                self._channel = None
