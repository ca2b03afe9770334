"""The lease fence: a capture writes downstream only while its session lease surely lives.

etcd expires the capture's lease ``ttl`` seconds after the last keepalive it *received*; the
owner then sees the capture key gone and hands its spans to other captures. So the capture
keeps a local deadline, ``sent + ttl`` with ``sent`` the monotonic time at which the last
answered keepalive was *sent* (never later than etcd received it): etcd cannot expire the
lease before it. The fence falls ``margin`` seconds before that deadline; from then on no
downstream write may start (``check`` raises ``WriteRefused``: the sinks ask it right before a
transaction's statements, its COMMIT, a DDL and a checkpoint save) and the capture stops its
processors. An answered keepalive moves the deadline (the fence rises again: the lease never
lapsed, so nothing was moved away); ``lose`` drops it until the next ``grant`` (the capture
sends no keepalive for a lease it gave up).

Worked example (ttl 3 s, keepalive every 0.5 s, margin 1 s): a keepalive sent at 10.0 is
answered, so the deadline is 13.0 and the fence falls at 12.0. The capture is cut from etcd at
10.2: the keepalives of 10.5, 11.0 ... go unanswered, at 12.0 every write is refused and the
processors are cancelled; etcd expires the lease at 13.0 at the earliest, and only then may
another capture claim the spans. A COMMIT that started at 11.99 is the only write that may
still be running: its row locks were taken before 12.0, so the new capture's writes to those
rows queue behind it (and it starts in safe mode from the span's checkpoint in etcd).

Invariant: ``is_open()`` is never true at or after ``deadline - margin`` of the newest lease
whose keepalive was answered, and never true after ``lose`` until a ``grant`` or an
answered keepalive (which proves the lease lived).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tributary.sinks import WriteRefused

Monotonic = Callable[[], float]


def keepalive_interval(ttl: float) -> float:
    """Seconds between two keepalives of a lease of ``ttl`` seconds (six per TTL)."""
    return ttl / 6


def fence_margin(ttl: float) -> float:
    """Seconds before the lease's local deadline at which the fence falls: a third of the
    TTL, two keepalive intervals. A healthy capture's deadline stays at least
    ``ttl - keepalive_interval`` ahead, so the keepalives sent in the slack between
    (``ttl/2``: three of them, each retried within it) may fail before the fence falls."""
    return ttl / 3


class LeaseFence:
    """The local deadline of the capture's lease and the fence ``margin`` seconds before it."""

    def __init__(
        self, ttl: float, margin: float | None = None, *, monotonic: Monotonic = time.monotonic
    ) -> None:
        if margin is None:
            margin = fence_margin(ttl)
        if not 0 < margin < ttl:
            raise ValueError(f"fence margin {margin} s must be within the lease ttl {ttl} s")
        self.ttl = ttl
        self.margin = margin
        self._monotonic = monotonic
        self._deadline = float("-inf")  # no lease yet: closed
        self._changed = asyncio.Event()

    @property
    def deadline(self) -> float:
        """Monotonic time before which etcd cannot have expired the lease."""
        return self._deadline

    def grant(self, sent: float) -> None:
        """A new lease (asked for at ``sent``) holds the capture's key: the fence may rise."""
        self._deadline = sent + self.ttl
        self._changed.set()

    def renewed(self, sent: float) -> None:
        """A keepalive sent at ``sent`` was answered: the deadline moves (forward only)."""
        self._deadline = max(self._deadline, sent + self.ttl)
        self._changed.set()

    def lose(self) -> None:
        """The lease is gone (expired, refused, or given up): closed until the next grant."""
        self._deadline = float("-inf")
        self._changed.set()

    def remaining(self) -> float:
        """Seconds until the fence falls (<= 0: it is down)."""
        return self._deadline - self.margin - self._monotonic()

    def is_open(self) -> bool:
        return self.remaining() > 0

    def check(self) -> None:
        """Raise ``WriteRefused`` unless a downstream write may start now."""
        left = self.remaining()
        if left <= 0:
            raise WriteRefused(
                f"the capture's lease may expire within {self.margin + left:.2f} s "
                f"(fence margin {self.margin:.2f} s): no downstream write starts"
            )

    async def wait_open(self) -> None:
        """Return once the fence is up."""
        while not self.is_open():
            self._changed.clear()
            await self._changed.wait()

    async def wait_fallen(self) -> None:
        """Return once the fence is down (its deadline only moves forward while it is up,
        so sleeping until the current one and looking again misses nothing)."""
        while True:
            left = self.remaining()
            if left <= 0:
                return
            self._changed.clear()
            # a ``lose`` wakes us at once; a renewal only moves the deadline further away
            try:
                async with asyncio.timeout(left):
                    await self._changed.wait()
            except TimeoutError:
                pass
