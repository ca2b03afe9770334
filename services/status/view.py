"""What the page shows, worked out from raw records (pure; no I/O).

Lags are wall-clock seconds behind a TSO: ``now - physical_ms(ts) / 1000``, the figure
tidb-binlog's ``binlog_drainer_checkpoint_tso`` alert and TiCDC's checkpoint lag use. Rates
are the growth of a counter between two samples of the same process; a counter that went
down (the process restarted) gives no rate rather than a negative one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tributary.wire.ts import physical_ms


def lag_seconds(ts: int, now: float) -> float | None:
    """Seconds ``ts`` is behind ``now``; None for no timestamp yet (0)."""
    if ts <= 0:
        return None
    return max(0.0, now - physical_ms(ts) / 1000)


def ts_time(ts: int) -> float | None:
    """The unix time (seconds) of a TSO, None for 0."""
    return physical_ms(ts) / 1000 if ts > 0 else None


@dataclass(frozen=True, slots=True)
class Reading:
    time: float
    value: float


class Rates:
    """Per-second growth of named counters between consecutive samples."""

    def __init__(self) -> None:
        self._last: dict[str, Reading] = {}

    def update(self, name: str, value: float | None, now: float) -> float | None:
        if value is None:
            self._last.pop(name, None)
            return None
        before = self._last.get(name)
        self._last[name] = Reading(now, value)
        if before is None or now <= before.time or value < before.value:
            return None
        return (value - before.value) / (now - before.time)


def owner_of(owner_keys: Mapping[bytes, tuple[int, str]]) -> str | None:
    """The capture id holding the election: the owner key written first (lowest create
    revision), as ``coord.election`` decides."""
    if not owner_keys:
        return None
    return min(owner_keys.values())[1]
