"""Pulling one pump: ``binlog.Pump/PullBinlogs`` into that pump's merge inbox.

The request is tipb's: ``PullBinlogReq{cluster_id, start_from: Pos{offset: last
commit ts}}``; the pump answers with every commit (its prewrite's data
attached) and fake binlog above that ts, in order, and keeps streaming. The
call goes through grpclib (``services.drainer.pullchannel``), which hands over
the responses that arrived together; of each, only the entity's payload is
read (``wire.views.pull_response_payload``, no betterproto object), and of
the payload its header (``wire.peek``).

Invariants:
- ``last_ts`` is the commit ts of the last item handed to the inbox, and every
  (re)connection asks for items after it, so nothing is skipped or repeated;
- any stream or connection error (an error status, a reset, a lost connection
  or unanswered keepalive pings, a refused connection or TLS handshake) is
  logged and retried after ``retry_interval`` (1 s) from ``last_ts``; a
  response or payload that is not a binlog is fatal (``MalformedPayload``):
  pulling past it would lose a transaction;
- while paused the puller holds no stream; ``resume`` reconnects from ``last_ts``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import NoReturn

from services.drainer.errors import MalformedPayload
from services.drainer.feed import Inbox
from services.drainer.item import PulledBinlogItem
from services.drainer.pullchannel import pull_messages
from tributary.net import split_host_port
from tributary.wire.binlog import Pos, PullBinlogReq, PullBinlogResp
from tributary.wire.peek import MalformedBinlog, peek
from tributary.wire.ts import LOGICAL_BITS
from tributary.wire.views import (
    MalformedMessage,
    PullBinlogRespView,
    parse_pull_response,
    pull_response_payload,
)

log = logging.getLogger(__name__)

RETRY_INTERVAL = 1.0  # seconds before reconnecting after an error or a closed stream


def _ignore(_: float) -> None:
    pass


@dataclass(frozen=True, slots=True)
class PullMetrics:
    """Where a puller reports, per binlog: its payload size in bytes (``read_binlog_size``)
    and the seconds from its commit to its arrival (``binlog_reach_duration_time``: the
    clock, read once per batch of responses, minus the commit ts' physical time); and the
    type of an error (``unmarshal_binlog``) before it stops."""

    size: Callable[[float], None] = _ignore
    reach: Callable[[float], None] = _ignore
    error: Callable[[str], None] = lambda _: None


def to_item(node_id: str, resp: PullBinlogResp | PullBinlogRespView) -> PulledBinlogItem:
    """The item for one streamed entity; MalformedPayload if it is not a binlog."""
    payload = resp.entity.payload
    try:
        header = peek(payload)
    except MalformedBinlog as e:
        raise MalformedPayload(
            f"pump {node_id} served an undecodable binlog (meta commit ts "
            f"{resp.entity.meta.commit_ts}): {e}"
        ) from e
    return PulledBinlogItem(header.commit_ts, header.start_ts, payload, header.is_fake)


def read_item(node_id: str, message: bytes) -> PulledBinlogItem:
    """The item for one marshalled ``PullBinlogResp``; MalformedPayload if it is not one or
    its payload is not a binlog."""
    try:
        payload = pull_response_payload(message)
        header = peek(payload)
    except (MalformedMessage, MalformedBinlog) as e:
        try:
            resp = parse_pull_response(message)
        except MalformedMessage:
            raise MalformedPayload(f"a pump sent an unreadable PullBinlogResp: {e}") from e
        return to_item(node_id, resp)  # raises MalformedPayload, naming the meta's commit ts
    return PulledBinlogItem(header.commit_ts, header.start_ts, payload, header.is_fake)


class Puller:
    """Streams one pump's binlogs into its inbox; run ``run()`` as a task, cancel to stop."""

    def __init__(
        self,
        node_id: str,
        addr: str,
        cluster_id: int,
        from_ts: int,
        inbox: Inbox,
        *,
        ssl_context: ssl.SSLContext | None = None,
        retry_interval: float = RETRY_INTERVAL,
        metrics: PullMetrics = PullMetrics(),
    ) -> None:
        self.node_id = node_id
        self.addr = addr
        self._cluster_id = cluster_id
        self._last_ts = from_ts
        self._inbox = inbox
        self._ssl = ssl_context
        self._retry_interval = retry_interval
        self._metrics = metrics
        self._running = asyncio.Event()
        self._running.set()
        self.received = 0  # items handed to the inbox
        self.reconnects = 0

    @property
    def last_ts(self) -> int:
        return self._last_ts

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def run(self) -> NoReturn:
        while True:
            await self._running.wait()
            try:
                await self._pull()
                if self.paused:
                    log.info("paused pulling pump %s at commit ts %d", self.node_id, self._last_ts)
                    continue
                log.warning("pump %s closed its stream; reconnecting", self.node_id)
            except MalformedPayload:
                self._metrics.error("unmarshal_binlog")
                raise
            except Exception as e:  # any stream error: reconnect from the last ts
                log.warning(
                    "pulling pump %s at %s failed after commit ts %d, retrying in %.0f s: %r",
                    self.node_id,
                    self.addr,
                    self._last_ts,
                    self._retry_interval,
                    e,
                )
            self.reconnects += 1
            await asyncio.sleep(self._retry_interval)

    async def _pull(self) -> None:
        host, port = split_host_port(self.addr)
        request = PullBinlogReq(cluster_id=self._cluster_id, start_from=Pos(offset=self._last_ts))
        log.info("pulling pump %s at %s after commit ts %d", self.node_id, self.addr, self._last_ts)
        batches = pull_messages(host, port, request, ssl_context=self._ssl)
        size, reach = self._metrics.size, self._metrics.reach
        async with aclosing(batches) as stream:
            async for batch in stream:
                now_ms = time.time() * 1000
                for message in batch:
                    item = read_item(self.node_id, message)
                    size(len(item.payload))
                    reach((now_ms - (item.commit_ts >> LOGICAL_BITS)) / 1000)
                    await self._inbox.put(item)
                    self._last_ts = max(self._last_ts, item.commit_ts)
                    self.received += 1
                    if self.paused:
                        return
