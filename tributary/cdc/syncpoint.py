"""Sync points (TiCDC's ``enable-sync-point``): their settings, TiCDC's rules for them, and
where they fall in commit-ts time.

A sync point at commit ts ``S`` is a moment when the downstream holds exactly the upstream's
transactions with commit ts <= ``S`` and none after; the changefeed then records
``(S, the downstream's own snapshot id)`` in the downstream's ``tidb_cdc.syncpoint_v1``
(``sinks.syncpoints``). The processors make the moment (``services.capture.processor``).

Settings, at the top level of a changefeed config, as TiCDC's::

    enable-sync-point = true
    sync-point-interval = "10m"     # Go duration text, or an integer of nanoseconds
    sync-point-retention = "24h"    # rows older than this are deleted

TiCDC's defaults (off, 10 min, 24 h) and TiCDC's validation (``ReplicaConfig.
ValidateAndAdjust``: with sync points on, an interval under 30 s or a retention under 1 h is
refused) apply. Records keep nanoseconds, as TiCDC's JSON does.

Where they fall (TiCDC's ``CalculateStartSyncPointTs`` and event broker): at the commit ts of
every whole multiple of the interval since the Unix epoch, logical part 0, i.e.
``compose(k * interval_ms, 0)``; the first is the first such ts at or after the changefeed's
checkpoint. Every processor of a changefeed finds the same points without talking to the
others, and a restart finds them again. A point ``S`` is due when the first item (transaction
or resolved marker) above it is read: everything before that item is <= ``S``.

Worked example, interval 30 s (points 30 s apart in physical time, ``30000 << 18`` apart as
ts): checkpoint at 12:00:10.000 gives first point 12:00:30.000. Items at 12:00:29 and
12:00:30.000 (its logical 0: the point itself) are before it; the item at 12:00:30.000 + 1
logical makes it due, with both applied and that item not yet. An idle stretch with no item
from 12:00:31 to 12:01:45 makes 12:01:00 and 12:01:30 due at once, at the item of 12:01:45.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from tributary.cdc.errors import BadRecord
from tributary.wire.ts import LOGICAL_BITS, compose, logical, physical_ms

SECOND_NS = 1_000_000_000
DEFAULT_INTERVAL_NS = 10 * 60 * SECOND_NS  # TiCDC's default sync-point-interval, 10m
DEFAULT_RETENTION_NS = 24 * 3600 * SECOND_NS  # TiCDC's default sync-point-retention, 24h
MIN_INTERVAL_NS = 30 * SECOND_NS  # TiCDC's minSyncPointInterval
MIN_RETENTION_NS = 3600 * SECOND_NS  # TiCDC's minSyncPointRetention
# Points one barrier writes at most: a changefeed started with an old --start-ts has every point
# from there to its first transaction due at once; the newest ones are kept.
MAX_POINTS_AT_ONCE = 1024

# Go's time.ParseDuration: decimal numbers, each with a unit, e.g. "1h30m", "1.5s", "300ms".
_UNITS_NS = {
    "ns": Fraction(1),
    "us": Fraction(1000),
    "µs": Fraction(1000),
    "μs": Fraction(1000),
    "ms": Fraction(10**6),
    "s": Fraction(SECOND_NS),
    "m": Fraction(60 * SECOND_NS),
    "h": Fraction(3600 * SECOND_NS),
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_ns(value: object, what: str) -> int:
    """Nanoseconds from Go duration text (``"10m"``, ``"1h30m"``) or an integer of
    nanoseconds (TiCDC's JSON); BadRecord naming ``what`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        ns = value
    elif isinstance(value, str):
        ns = _parse_text(value.strip(), what)
    else:
        raise BadRecord(f'{what} must be a duration such as "10m" or "1h30m", not {value!r}')
    if ns <= 0:
        raise BadRecord(f"{what} must be positive, not {value!r}")
    return ns


def _parse_text(text: str, what: str) -> int:
    if text == "0":
        return 0
    total, pos = Fraction(0), 0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        total += Fraction(m.group(1)) * _UNITS_NS[m.group(2)]
        pos = m.end()
    if pos == 0 or pos != len(text):
        raise BadRecord(
            f'{what} must be a duration such as "10m" or "1h30m" (units ns, us, ms, s, m, '
            f"h), not {text!r}"
        )
    return int(total)


def go_duration(ns: int) -> str:
    """Nanoseconds as Go prints whole-second durations (``600000000000`` -> ``"10m0s"``), or
    in nanoseconds when not whole seconds; for messages."""
    if ns % SECOND_NS:
        return f"{ns}ns"
    hours, rest = divmod(ns // SECOND_NS, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{minutes}m{seconds}s"
    return f"{seconds}s"


def check_settings(interval_ns: int, retention_ns: int) -> None:
    """TiCDC's rule for a changefeed with sync points on; BadRecord with TiCDC's reason."""
    if interval_ns < MIN_INTERVAL_NS:
        raise BadRecord(
            f"sync-point-interval {go_duration(interval_ns)} must be at least "
            f"{go_duration(MIN_INTERVAL_NS)} (TiCDC's minimum)"
        )
    if retention_ns < MIN_RETENTION_NS:
        raise BadRecord(
            f"sync-point-retention {go_duration(retention_ns)} must be at least "
            f"{go_duration(MIN_RETENTION_NS)} (TiCDC's minimum)"
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """The sync points of one interval (milliseconds, at least 1)."""

    interval_ms: int

    @classmethod
    def every(cls, interval_ns: int) -> Schedule:
        return cls(max(1, interval_ns // 1_000_000))

    @property
    def step(self) -> int:
        """The distance between two points, as ts."""
        return self.interval_ms << LOGICAL_BITS

    def first_at_or_after(self, ts: int) -> int:
        """The first point >= ``ts``: ``ts`` itself when it is one."""
        k, rest = divmod(physical_ms(ts), self.interval_ms)
        if rest or logical(ts):
            k += 1
        return compose(k * self.interval_ms, 0)

    def due(self, first: int, before: int) -> tuple[int, ...]:
        """The points from ``first`` (a point) up to but not including ``before``, at most
        ``MAX_POINTS_AT_ONCE`` (the newest ones)."""
        if before <= first:
            return ()
        count = (before - 1 - first) // self.step + 1
        skip = max(0, count - MAX_POINTS_AT_ONCE)
        return tuple(first + i * self.step for i in range(skip, count))
