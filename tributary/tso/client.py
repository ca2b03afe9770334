"""Getting timestamps: the ``Tso`` port and its client over gRPC.

``TsoClient`` finds the TSO leader through the election keys (watching the
prefix), coalesces concurrent ``get_ts()`` calls into one ``GetTimestamps``
RPC with ``count = N`` (one RPC in flight per client; callers arriving during
it form the next batch; see ``batching``), and follows the leader when it
moves. Given the caller's own ``TsoMember`` it allocates in-process whenever
that member leads and uses the network otherwise, so an embedding service
needs only this class.

Invariant: within a batch the callers get consecutive timestamps in arrival
order; every timestamp comes from the single current leader, so a call that
starts after another returned gets a larger timestamp.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from types import TracebackType
from typing import Protocol

from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from tributary.coord.election import current_leader
from tributary.coord.kv import Kv, KvError
from tributary.net import split_host_port
from tributary.tso.batching import BatchTexts, Retry, TimestampBatcher
from tributary.tso.errors import NotLeader, TsoError
from tributary.tso.keys import LEADER_PREFIX
from tributary.tso.member import TsoMember
from tributary.wire.binlogext import TsoRequest, TsoStub

log = logging.getLogger(__name__)


class Tso(Protocol):
    async def get_ts(self) -> int:
        """A timestamp larger than any handed out before this call started."""


_TEXTS = BatchTexts(
    expired="no TSO leader answered in time",
    timed_out="timed out waiting for a timestamp",
    closed="TSO client closed",
)


class TsoClient:
    """The ``Tso`` port over gRPC (and in-process when ``member`` leads). Async context manager.

    ``timeout`` (s) bounds each ``get_ts()``: past it, TsoError(retriable=True).
    ``rpc_timeout`` (s) bounds one GetTimestamps attempt. A wrong cluster ID
    raises TsoError(retriable=False) at once.
    """

    def __init__(
        self,
        kv: Kv,
        cluster_id: int,
        *,
        member: TsoMember | None = None,
        timeout: float = 10.0,
        rpc_timeout: float = 3.0,
        prefix: bytes = LEADER_PREFIX,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._kv = kv
        self._ssl = ssl_context
        self._cluster_id = cluster_id
        self._member = member
        self._timeout = timeout
        self._rpc_timeout = rpc_timeout
        self._prefix = prefix
        self._leader: str | None = None
        self._channel: Channel | None = None
        self._channel_addr: str | None = None
        self._batcher = TimestampBatcher(
            self._request_guarded, _TEXTS, task_name="tso-client-flush"
        )
        self._watch_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TsoClient:
        await self._batcher.__aenter__()
        self._watch_task = asyncio.create_task(self._watch_loop(), name="tso-client-watch")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            await asyncio.gather(self._watch_task, return_exceptions=True)
            self._watch_task = None
        await self._batcher.__aexit__(exc_type, exc, tb)
        self._close_channel()

    async def get_ts(self) -> int:
        if not self._batcher.running:
            raise RuntimeError("TsoClient not entered")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        member = self._member
        if member is not None and member.is_leader:
            try:
                async with asyncio.timeout_at(deadline):
                    return await member.get_timestamps(1)
            except NotLeader:
                pass  # it just stepped down: ask whoever leads now
            except TimeoutError as e:
                raise TsoError(_TEXTS.timed_out, retriable=True) from e
        return await self._batcher.get(deadline)

    # -- requests ---------------------------------------------------------

    async def _request_guarded(self, count: int, deadline: float) -> int:
        try:
            return await self._request(count, deadline)
        except (Retry, TsoError):
            raise
        except Exception as e:  # a bug or an unexpected reply: fail the batch, keep serving
            log.exception("TSO request failed unexpectedly")
            raise TsoError(f"TSO request failed: {e!r}", retriable=True) from e

    async def _request(self, count: int, deadline: float) -> int:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise Retry("deadline passed")
        channel = await self._leader_channel()
        request = TsoRequest(cluster_id=self._cluster_id, count=count)
        try:
            reply = await TsoStub(channel).get_timestamps(
                request, timeout=min(remaining, self._rpc_timeout)
            )
        except GRPCError as e:
            if e.status in (Status.FAILED_PRECONDITION, Status.INVALID_ARGUMENT):
                raise TsoError(f"TSO rejected the request: {e.message}", retriable=False) from e
            await self._forget_leader()
            raise Retry(f"{e.status.name}: {e.message}") from e
        except (StreamTerminatedError, ProtocolError, OSError, TimeoutError) as e:
            await self._forget_leader()
            raise Retry(repr(e)) from e
        if reply.count != count:
            raise TsoError(f"TSO answered {reply.count} timestamps for {count}", retriable=True)
        return reply.last

    # -- leader tracking --------------------------------------------------

    async def _leader_channel(self) -> Channel:
        if self._leader is None:
            await self._refresh_leader()
        if self._leader is None:
            raise Retry("no TSO leader is elected")
        if self._channel is None or self._channel_addr != self._leader:
            self._close_channel()
            try:
                host, port = split_host_port(self._leader)
            except ValueError as e:
                raise Retry(f"bad TSO leader address {self._leader!r}") from e
            channel = Channel(host, port, ssl=self._ssl)
            self._channel, self._channel_addr = channel, self._leader
        return self._channel

    async def _forget_leader(self) -> None:
        self._close_channel()
        self._leader = None

    async def _refresh_leader(self) -> None:
        try:
            found = await current_leader(self._kv, self._prefix)
        except KvError as e:
            raise Retry(f"cannot read the TSO leader: {e}") from e
        self._leader = None if found is None else found.value.decode()

    def _close_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel, self._channel_addr = None, None

    async def _watch_loop(self) -> None:
        """Follow leader changes so the next RPC goes to the new leader directly."""
        backoff = 0.1
        while True:
            try:
                await self._refresh_leader()
                async for _event in self._kv.watch_prefix(self._prefix):
                    await self._refresh_leader()
                    backoff = 0.1
            except (Retry, KvError) as e:
                log.warning("TSO leader watch failed, retrying: %s", e)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
