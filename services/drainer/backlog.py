"""The drainer's backlog in binlogs: how many commits the pumps hold above its position.

``PumpBacklog`` is the ``BacklogCounter`` the catch-up controller measures with
(``CatchUp.measure_backlog``): it lists the pumps in the registry, asks every one that is not
``offline`` over ``binlogext.PumpStats/Backlog`` (a short-lived channel per pump and
measurement, with the pullers' TLS settings, bounded by ``timeout``) and sums the counts.

Invariant: the figure is all or nothing. If any pump cannot tell (unreachable, paused, a Go
pump without the service, a cluster ID mismatch, a timeout) or the registry cannot be read,
the answer is None ("unknown", logged at info with the reason), never a partial sum that
would understate the backlog. Worked example: pumps p1 (holds 120 commits above the
checkpoint), p2 (30), p3 offline -> 150; p2 unreachable -> None.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable

from grpclib.client import Channel
from grpclib.exceptions import GRPCError, StreamTerminatedError

from tributary.coord.kv import KvError
from tributary.errors import TributaryError
from tributary.net import split_host_port
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState
from tributary.wire.binlogext import BacklogReq, PumpStatsStub

log = logging.getLogger(__name__)

TIMEOUT = 10.0  # seconds one measurement may take (every pump asked at once)


class BacklogUnknown(TributaryError):
    """One pump could not tell how many binlogs it holds; retried at the next measurement."""

    retriable = True


# (pump address, after_ts) -> commits that pump holds above after_ts
AskPump = Callable[[str, int], Awaitable[int]]


def grpc_asker(
    cluster_id: int, *, ssl_context: ssl.SSLContext | None = None, timeout: float = TIMEOUT
) -> AskPump:
    """Ask one pump over ``binlogext.PumpStats/Backlog`` on a channel of its own."""

    async def ask(addr: str, after_ts: int) -> int:
        try:
            host, port = split_host_port(addr)
        except ValueError as e:
            raise BacklogUnknown(f"bad pump address: {e}") from e
        channel = Channel(host, port, ssl=ssl_context)
        try:
            req = BacklogReq(cluster_id=cluster_id, after_ts=after_ts)
            resp = await PumpStatsStub(channel).backlog(req, timeout=timeout)
        except GRPCError as e:
            raise BacklogUnknown(f"{e.status.name}: {e.message}") from e
        except (OSError, StreamTerminatedError, TimeoutError) as e:
            raise BacklogUnknown(f"{type(e).__name__}: {e}") from e
        finally:
            channel.close()
        return resp.count

    return ask


class PumpBacklog:
    """A ``BacklogCounter`` over the registered pumps; see the module docstring."""

    def __init__(self, registry: NodeRegistry, ask: AskPump, *, timeout: float = TIMEOUT) -> None:
        self._registry = registry
        self._ask = ask
        self._timeout = timeout
        self.last: dict[str, int] = {}  # pump id -> its count in the last full measurement

    async def __call__(self, after_ts: int) -> int | None:
        try:
            pumps = await self._registry.list(NodeKind.PUMP)
        except KvError as e:
            log.info("backlog unknown: cannot list the pumps: %s", e)
            return None
        asked = {p.node_id: p.addr for p in pumps if p.state is not NodeState.OFFLINE}
        counts: dict[str, int | None] = {}
        try:
            async with asyncio.timeout(self._timeout * 1.5):
                async with asyncio.TaskGroup() as tg:
                    for node_id, addr in asked.items():
                        tg.create_task(
                            self._one(node_id, addr, after_ts, counts), name=f"backlog-{node_id}"
                        )
        except TimeoutError:
            missing = sorted(set(asked) - set(counts))
            log.info("backlog unknown: pump(s) %s did not answer in time", ", ".join(missing))
            return None
        if any(c is None for c in counts.values()):
            return None
        self.last = {node_id: c for node_id, c in counts.items() if c is not None}
        total = sum(self.last.values())
        log.debug("backlog above commit ts %d: %d binlogs (%s)", after_ts, total, self.last)
        return total

    async def _one(
        self, node_id: str, addr: str, after_ts: int, into: dict[str, int | None]
    ) -> None:
        try:
            into[node_id] = await self._ask(addr, after_ts)
        except BacklogUnknown as e:
            log.info("backlog unknown: pump %s at %s cannot tell: %s", node_id, addr, e)
            into[node_id] = None
