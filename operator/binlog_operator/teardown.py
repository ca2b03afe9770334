"""Closing a deleted BinlogCluster's drainers: best effort, within a time budget.

A drainer left ``online`` in the registry after its cluster is gone holds every pump that shares
that etcd from going offline (a pump waits for all non-offline drainers), so the deletion closes
each drainer through its HTTP API, after the pumps (whose binlogs the drainers must consume
first). Unlike the pumps, a drainer holds no binlog of its own: one that cannot be closed must not
keep the cluster from going forever. Invariant: ``close_within`` returns after at most ``budget``
seconds (plus the one attempt in flight, itself bounded by ``remaining``) with the drainers it
could not close and why; the caller reports them and lets the deletion proceed.

Worked example: drainers a and b, budget 60 s, delay 15 s, b unreachable (each attempt fails
after the 10 s HTTP timeout). t=0: a is closed and offline at once; b's attempt fails at t=10.
Sleep to t=25: b fails at t=35. Sleep to t=50: b's attempt gets ``remaining`` 10 s and fails at
t=60. Another round would start after the deadline: ``{"b": "<its last error>"}`` is returned.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from binlog_operator.scaledown import Clock, ScaleDownError, SystemClock

log = logging.getLogger(__name__)

Attempt = Callable[[str, float], Awaitable[None]]
"""Close one drainer and wait (at most the given seconds) for it to be offline; raise
ScaleDownError if that did not happen."""


async def close_within(
    drainers: Sequence[str],
    attempt: Attempt,
    *,
    budget: float,
    delay: float,
    clock: Clock | None = None,
) -> dict[str, str]:
    """Attempt each drainer until it is closed or ``budget`` seconds have passed, ``delay``
    seconds between rounds; returns ``{drainer: last error}`` of those left."""
    clock = clock or SystemClock()
    deadline = clock.monotonic() + budget
    left: dict[str, str] = {d: "not attempted" for d in drainers}
    while left:
        for drainer in list(left):
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                return left
            try:
                await attempt(drainer, remaining)
            except ScaleDownError as e:
                left[drainer] = str(e)
                log.warning("drainer %s not closed yet: %s", drainer, e)
            else:
                del left[drainer]
        if left:
            if clock.monotonic() + delay >= deadline:
                return left
            await clock.sleep(delay)
    return left
