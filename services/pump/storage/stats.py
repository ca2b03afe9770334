"""Numbers the storage keeps for the pump's ``binlog_pump_storage_*`` metrics.

No Prometheus here: plain counters and bucketed distributions that the pump
maps to its collectors. Names follow tidb-binlog (``pump/storage/metrics.go``):
``max_commit_ts``, ``gc_ts``, ``done_gc_ts``, ``deleted_kv_total``,
``write_binlog_size{single|batch}``,
``write_binlog_duration_time{single|batch|to_disk|fsync|rotate}``,
``error_count{type}``, ``storage_size_bytes{capacity|available}`` and
``loss_binlog_count``; ours beside them: the stop-write floor and whether free space is at or
below it (``stop_write_at_available_space_bytes``, ``stop_write``).

Invariant: every number only grows, except the gauges ``max_commit_ts``,
``gc_ts``, ``done_gc_ts`` and ``available_bytes``.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

SIZE_BUCKETS: tuple[float, ...] = tuple(float(16 << n) for n in range(25))  # tidb-binlog's: 16 B ..
DURATION_BUCKETS: tuple[float, ...] = tuple(0.00005 * 2**n for n in range(20))  # 50 us .. ~26 s


@dataclass(slots=True)
class Distribution:
    """Count, sum and per-bucket counts (``counts[i]``: observations <= ``bounds[i]``,
    not cumulative; the last slot is for values above every bound)."""

    bounds: tuple[float, ...]
    count: int = 0
    total: float = 0.0
    counts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.counts[bisect.bisect_left(self.bounds, value)] += 1

    def observe_many(self, values: Sequence[float]) -> None:
        """:meth:`observe` each of ``values``."""
        counts, bounds, where = self.counts, self.bounds, bisect.bisect_left
        for value in values:
            counts[where(bounds, value)] += 1
        self.count += len(values)
        self.total += sum(values)


def _sizes() -> dict[str, Distribution]:
    return {k: Distribution(SIZE_BUCKETS) for k in ("single", "batch")}


def _durations() -> dict[str, Distribution]:
    keys = ("single", "batch", "to_disk", "fsync", "rotate")
    return {k: Distribution(DURATION_BUCKETS) for k in keys}


@dataclass(slots=True)
class StorageStats:
    max_commit_ts: int = 0
    gc_ts: int = 0
    done_gc_ts: int = 0
    """TS up to which index rows and segments have actually been removed."""
    deleted_kv_total: int = 0
    available_bytes: int = 0
    capacity_bytes: int = 0
    """``storage_size_bytes{available|capacity}``, refreshed at most every few seconds."""
    stop_write_at_available_space: int = 0
    """The floor (a setting): prewrites are refused while free space is at or below it."""
    write_binlog_size: dict[str, Distribution] = field(default_factory=_sizes)
    write_binlog_duration_time: dict[str, Distribution] = field(default_factory=_durations)
    error_count: Counter[str] = field(default_factory=Counter)
    """By type: ``write``, ``index``, ``read``, ``missing_prewrite``, ``corrupt``."""
    loss_binlog_count: int = 0
    """Damaged value-log spans found (each is at least one binlog that cannot be served)."""
    corrupt_bytes: int = 0
    """Bytes skipped (corrupt spans) or truncated (torn tails) by recovery scans."""
    resolved: Counter[str] = field(default_factory=Counter)
    """Timed-out prewrites settled through the resolver, by outcome."""
    stuck_prewrites: list[int] = field(default_factory=list)
    """start_ts of the prewrites waiting past ``max_txn_timeout`` (a gauge: it shrinks)."""
    batches: int = 0
    binlogs_written: int = 0

    @property
    def stop_write(self) -> bool:
        """Free space, as last measured, is at or below the floor (prewrites are refused)."""
        return (
            self.capacity_bytes > 0 and self.available_bytes <= self.stop_write_at_available_space
        )
