"""ApproachTs: the last TSO timestamp moved on by local monotonic time, never backwards."""

from __future__ import annotations

from tributary.tso.approach import ApproachTs
from tributary.wire import ts


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_700_000_000.0
        self.mono = 50.0


class FixedTso:
    def __init__(self, value: int) -> None:
        self.value = value

    async def get_ts(self) -> int:
        return self.value


def approach_of(clocks: Clocks) -> ApproachTs:
    return ApproachTs(wall=lambda: clocks.wall, monotonic=lambda: clocks.mono)


def test_local_clock_before_any_timestamp() -> None:
    clocks = Clocks()
    assert approach_of(clocks).approach() == ts.from_seconds(clocks.wall)


async def test_last_seen_plus_elapsed_and_never_back() -> None:
    clocks = Clocks()
    approach = approach_of(clocks)
    seen = ts.compose(10_000, 5)
    tso = approach.observing(FixedTso(seen))
    assert await tso.get_ts() == seen
    assert approach.approach() == seen  # no time passed: not below what was handed out
    clocks.mono += 2.5
    assert approach.approach() == ts.compose(12_500, 0)
    approach.observe(ts.compose(9_000, 1))  # an older timestamp does not move it back
    assert approach.approach() == ts.compose(12_500, 0)
