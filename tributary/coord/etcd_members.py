"""The members of one etcd cluster as ``coord.etcd`` sees them: which one it talks to, and
moving to the next when that one stops answering.

Invariant: a request goes to one member at a time. When an attempt fails in a way a retry
may cure (unavailable, deadline, ...), the client moves on to the next member (only if the
failed one is still the current one, so concurrent failures move it once) and sends the
request again there, until every member was tried within ``timeout``. An attempt gets at
most ``attempt_timeout`` when there is another member to go to: a frozen member (SIGSTOP,
a stalled disk, a lost network) holds a request until its deadline, and a lease of a few
seconds has to be refreshed elsewhere before then. With one endpoint nothing is retried
here (the caller decides), as before failover existed.

A failed attempt may still have reached its member: its outcome is unknown, and the member
may even apply it later (a frozen one does so when it wakes). The request functions get
``resent=True`` on a later attempt so a mutation whose answer depends on whether the first
attempt applied reports ``OutcomeUnknown`` instead of answering wrongly (``coord.etcd``).

Watches follow the current member too: a watch stream belongs to the member it was opened
on, and ``abandoned`` is set when the client moves away from that member, so the watch
re-opens on the new one (from the revision it had reached: nothing repeated or skipped).

Example: members A, B, C; A is current and gets SIGSTOPped. A keepalive sent to A has no
answer after ``attempt_timeout`` (0.75 s): the client makes B current, sets A's
``abandoned`` (watches on A re-open on B) and sends the keepalive to B, which answers. The
lease, which etcd keeps cluster-wide, lives on; A is tried again only after B and C fail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aetcd
import grpc  # type: ignore[import-untyped]
from aetcd import rpc

from tributary.coord.etcd_grpc import RETRIABLE_CODES, mapped_error
from tributary.coord.kv import KvError

log = logging.getLogger(__name__)

T = TypeVar("T")
Attempt = Callable[["Member", float, bool], Awaitable[T]]

_ROUND_PAUSE = 0.1  # seconds between two rounds over every member (all of them failed)
# Worth another member: what a retry may cure, and UNKNOWN, which etcd answers when a
# member's own forward to the raft leader failed (a lease keepalive while the leader is
# gone: "context deadline exceeded"). The error raised in the end keeps its own retriability.
_FAIL_OVER_CODES = RETRIABLE_CODES | {grpc.StatusCode.UNKNOWN}


@dataclass
class Member:
    """One endpoint: its aetcd client (which owns the gRPC channel) and our stubs on it."""

    endpoint: str
    client: aetcd.Client
    kv: Any = field(init=False)
    lease: Any = field(init=False)
    watch: Any = field(init=False)
    abandoned: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.kv = rpc.KVStub(self.client.channel)
        self.lease = rpc.LeaseStub(self.client.channel)
        self.watch = rpc.WatchStub(self.client.channel)

    @property
    def metadata(self) -> Any:
        return self.client.metadata

    async def status(self, timeout: float) -> None:  # noqa: ASYNC109 (a gRPC deadline)
        """One cheap request; raises grpc.aio.AioRpcError when the member does not answer."""
        await rpc.MaintenanceStub(self.client.channel).Status(rpc.StatusRequest(), timeout=timeout)


class Members:
    """The configured members and the current one; ``call`` sends a request with failover."""

    def __init__(
        self, members: list[Member], current: int, timeout: float, attempt_timeout: float
    ) -> None:
        self._members = members
        self._current = current
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout if len(members) > 1 else timeout
        self.closed = False

    @property
    def current(self) -> Member:
        return self._members[self._current]

    @property
    def all(self) -> list[Member]:
        return list(self._members)

    def fail_over(self, member: Member, why: str) -> None:
        """Move to the next member if ``member`` is still the current one."""
        if len(self._members) == 1 or self.current is not member:
            return
        self._current = (self._current + 1) % len(self._members)
        nxt = self.current
        nxt.abandoned = asyncio.Event()
        member.abandoned.set()
        log.warning("etcd member %s failed (%s); moving to %s", member.endpoint, why, nxt.endpoint)

    async def call(self, what: str, attempt: Attempt[T]) -> T:
        """``attempt(member, deadline_s, resent)`` on the current member, then on the next
        ones while the failure is retriable and ``timeout`` lasts; KvError when none answers."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        failures = 0
        while True:
            member = self.current
            budget = min(self.attempt_timeout, deadline - loop.time())
            try:
                return await attempt(member, budget, failures > 0)
            except grpc.aio.UsageError as e:
                raise KvError(f"etcd {what} failed: client is closed", retriable=False) from e
            except grpc.aio.AioRpcError as e:
                err = mapped_error(what, e)
                if e.code() not in _FAIL_OVER_CODES or self.closed or len(self._members) == 1:
                    raise err from e
                failures += 1
                self.fail_over(member, f"{what}: {e.code().name}")
                left = deadline - loop.time()
                if failures % len(self._members) == 0:
                    if left <= _ROUND_PAUSE:
                        raise err from e
                    await asyncio.sleep(_ROUND_PAUSE)
                elif left <= 0:
                    raise err from e

    async def close(self) -> None:
        self.closed = True
        for member in self._members:
            member.abandoned.set()
            await member.client.close()
