"""The latest timestamp a process saw from its TSO, moved on by the local time since.

tidb-binlog's ``GetApproachTS``: a pump or drainer stamps its status (``updateTS``) and measures
transaction timeouts against "the TSO's time now", without asking the TSO each time. In PD
mode that is PD's clock, not the local one; the two differ by the hosts' clock skew.

Invariant: the value never goes back (the last seen ts plus non-negative monotonic time), and
before any timestamp was seen it is the local clock's.

Worked example: get_ts() returned (physical 10_000 ms, logical 5) at monotonic 50.0 s; at
monotonic 52.5 s the approach ts is (physical 12_500, logical 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tributary.tso.client import Tso
from tributary.wire import ts


class ApproachTs:
    """``approach()`` is the estimate; wrap the process's ``Tso`` with :meth:`observing`."""

    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._seen = 0
        self._seen_at = 0.0

    def observe(self, timestamp: int) -> None:
        if timestamp > self._seen:
            self._seen, self._seen_at = timestamp, self._monotonic()

    def approach(self) -> int:
        if not self._seen:
            return ts.from_seconds(self._wall())
        elapsed_ms = int((self._monotonic() - self._seen_at) * 1000)
        return max(self._seen, ts.compose(ts.physical_ms(self._seen) + elapsed_ms, 0))

    def observing(self, tso: Tso) -> Tso:
        """``tso`` whose every timestamp also updates this estimate."""
        return _Observed(tso, self)


class _Observed:
    def __init__(self, tso: Tso, approach: ApproachTs) -> None:
        self._tso = tso
        self._approach = approach

    async def get_ts(self) -> int:
        value = await self._tso.get_ts()
        self._approach.observe(value)
        return value
