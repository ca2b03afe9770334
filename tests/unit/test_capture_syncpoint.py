"""Sync points' pure parts: durations as TiCDC reads them, and the schedule.

Proves: durations read as Go's ParseDuration reads them (or nanoseconds, TiCDC's JSON); the
points fall on whole multiples of the interval since the epoch (logical 0), the first one at or
after the checkpoint, and a gap makes every point in it due, up to a cap.
"""

from __future__ import annotations

import pytest

from tributary.cdc.errors import BadRecord
from tributary.cdc.syncpoint import (
    MAX_POINTS_AT_ONCE,
    Schedule,
    go_duration,
    parse_duration_ns,
)
from tributary.wire.ts import compose

S = 1_000_000_000


def test_durations_read_as_go_parses_them() -> None:
    assert parse_duration_ns("10m", "x") == 600 * S
    assert parse_duration_ns("1h30m", "x") == 5400 * S
    assert parse_duration_ns("1.5s", "x") == 1_500_000_000
    assert parse_duration_ns("300ms", "x") == 300_000_000
    assert parse_duration_ns(30_000_000_000, "x") == 30 * S  # TiCDC's JSON: nanoseconds
    for bad in ("10", "10 m", "1d", "", "m", True, 1.5, "-5s", 0, "0"):
        with pytest.raises(BadRecord, match=r"^x must be"):
            parse_duration_ns(bad, "x")
    assert [go_duration(n) for n in (600 * S, 5400 * S, 30 * S, 1)] == [
        "10m0s",
        "1h30m0s",
        "30s",
        "1ns",
    ]


def ts(seconds: float, logical: int = 0) -> int:
    return compose(round(seconds * 1000), logical)


def test_points_fall_on_multiples_of_the_interval_since_the_epoch() -> None:
    every30 = Schedule.every(30 * S)
    assert every30.interval_ms == 30_000 and every30.step == 30_000 << 18
    base = 1_700_000_010  # a whole multiple of 30 s plus 0
    assert base % 30 == 0
    assert every30.first_at_or_after(ts(base)) == ts(base)  # a point itself
    assert every30.first_at_or_after(ts(base, 1)) == ts(base + 30)  # a logical past it
    assert every30.first_at_or_after(ts(base + 0.001)) == ts(base + 30)
    assert every30.first_at_or_after(ts(base - 29.999)) == ts(base)
    odd = Schedule.every(7 * S + 500_000_000)  # 7.5 s
    assert odd.first_at_or_after(ts(base + 1)) == ts(base + 7.5)  # base is one of its points


def test_due_points_lie_before_the_item_that_passes_them() -> None:
    every30 = Schedule.every(30 * S)
    first = ts(1_700_000_010)
    assert every30.due(first, first) == ()  # an item at the point itself is before it
    assert every30.due(first, first + 1) == (first,)
    assert every30.due(first, ts(1_700_000_039)) == (first,)
    gap = every30.due(first, ts(1_700_000_100))  # an idle stretch over three points
    assert gap == (first, ts(1_700_000_040), ts(1_700_000_070))
    huge = every30.due(first, first + (MAX_POINTS_AT_ONCE + 5) * every30.step)
    assert len(huge) == MAX_POINTS_AT_ONCE
    assert huge[0] == first + 5 * every30.step  # the newest ones
