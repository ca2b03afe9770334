"""PD's side of the ``Tso`` port: cluster ID and timestamps from a PD (``pdpb.PD``).

``probe_pd`` asks each URL for ``GetMembers`` the way PD's Go client starts: a URL that
answers gives the cluster ID; plain etcd answers UNIMPLEMENTED. ``PdClient`` is the ``Tso``
port over PD: it keeps one ``Tso`` stream to the leader, coalesces concurrent ``get_ts()``
calls into one request with ``count = N`` (one request in flight; callers arriving during it
form the next batch) and, when the stream fails, asks ``GetMembers`` for the leader again,
over every member URL PD gave it (PD's client also learns its URL list this way).

Invariant: a batch's callers get the ``count`` consecutive timestamps ending at the reply's
``logical`` (PD sends the last one), in arrival order; a reply that would go back below the
last timestamp handed out is refused, so this client never hands out a smaller timestamp.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from tributary.tso.allocator import MAX_COUNT
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


@dataclass(slots=True)
class _Waiter:
    deadline: float
    future: asyncio.Future[int]


class _Retry(Exception):
    """This attempt failed in a way a new leader (or the same, later) may fix."""


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
        self._pending: list[_Waiter] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PdClient:
        self._task = asyncio.create_task(self._flush_loop(), name="pd-client-flush")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for waiter in self._pending:
            if not waiter.future.done():
                waiter.future.set_exception(TsoError("PD client closed", retriable=True))
        self._pending.clear()
        await self._close_stream()

    async def get_ts(self) -> int:
        if self._task is None:
            raise RuntimeError("PdClient not entered")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        waiter = _Waiter(deadline, loop.create_future())
        self._pending.append(waiter)
        self._wakeup.set()
        try:
            async with asyncio.timeout_at(deadline + 1.0):  # the flusher fails it first
                return await waiter.future
        except TimeoutError as e:
            raise TsoError("timed out waiting for a timestamp from PD", retriable=True) from e

    # -- batching ---------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch = self._take([])
            if batch:
                await self._serve(batch)

    def _take(self, batch: list[_Waiter]) -> list[_Waiter]:
        live = [w for w in batch + self._pending if not w.future.done()]
        batch, self._pending = live[:MAX_COUNT], live[MAX_COUNT:]
        if self._pending:
            self._wakeup.set()
        return batch

    async def _serve(self, batch: list[_Waiter]) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.05
        while batch:
            try:
                last = await self._request(len(batch))
            except _Retry as e:
                await self._close_stream()
                now = loop.time()
                for w in batch:
                    if w.deadline <= now and not w.future.done():
                        w.future.set_exception(
                            TsoError(f"no timestamp from PD in time: {e}", retriable=True)
                        )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                batch = self._take(batch)
                continue
            except TsoError as e:
                await self._close_stream()
                for w in batch:
                    if not w.future.done():
                        w.future.set_exception(e)
                return
            first = last - len(batch) + 1
            for offset, w in enumerate(batch):
                if not w.future.done():
                    w.future.set_result(first + offset)
            return

    async def _request(self, count: int) -> int:
        stream = await self._leader_stream()
        request = TsoRequest(header=RequestHeader(cluster_id=self._cluster_id), count=count)
        try:
            await stream.send_message(request)
            reply: TsoResponse | None = await asyncio.wait_for(stream.recv_message(), 5.0)
        except GRPCError as e:
            if e.status is Status.FAILED_PRECONDITION:
                raise TsoError(f"PD refused the request: {e.message}", retriable=False) from e
            raise _Retry(f"{e.status.name}: {e.message}") from e
        except _NETWORK_ERRORS as e:
            raise _Retry(repr(e)) from e
        if reply is None or reply.timestamp is None:
            raise _Retry("PD ended the Tso stream")
        if reply.count != count:
            raise _Retry(f"PD answered {reply.count} timestamps for {count}")
        last = ts.compose(reply.timestamp.physical, reply.timestamp.logical)
        if last - count + 1 <= self._last:
            raise _Retry(f"PD's timestamp {last} went back below {self._last}")
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
            raise _Retry(f"cannot open a Tso stream to {leader}: {e!r}") from e
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
        raise _Retry(f"no PD leader found: {'; '.join(errors)}")

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
