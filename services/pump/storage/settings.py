"""Storage settings and the free-disk-space guard.

Invariant: when free space is at or below ``stop_write_at_available_space``,
prewrites are refused with :class:`StorageFull` while commits, rollbacks and
fake binlogs are still stored, so transactions already under way can finish
(and the pump's max commit ts keeps moving). ``statvfs`` is consulted at most
once per ``space_check_interval``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tributary.wire.binlog import BinlogType
from tributary.wire.peek import BinlogHeader

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class StorageSettings:
    sync_log: bool = True
    """fdatasync the value log once per group-commit batch before acknowledging it."""
    segment_size: int = 500 * MiB
    """Bytes after which a value-log segment is finalized and a new one started."""
    kv_chan_cap: int = 1 << 20
    """Most write requests queued for the writer task before ``write`` waits (backpressure)."""
    slow_write_threshold: float = 1.0
    """Seconds; a batch slower than this is logged as a slow write."""
    max_txn_timeout: float = 600.0
    """Seconds (TSO physical time) a prewrite may wait for its commit before it is resolved
    (``wait``: reported as stuck; ``rollback``: rolled back)."""
    stop_write_at_available_space: int = 10 * GiB
    """Bytes; at or below this much free space prewrites are refused."""
    space_check_interval: float = 3.0
    """Seconds between two ``statvfs`` calls."""
    batch_bytes: int = 4 * MiB
    """Group-commit batch limit in payload bytes (a batch may exceed it by its first request)."""
    gc_margin: float = 600.0
    """Seconds (TSO) kept below a GC ts so late commits still find their prewrite."""
    finalize_on_close: int = 50 * 1024
    """Bytes; on close the current segment gets its footer if at least this big."""


def available_space(path: Path | str) -> int:
    """Bytes available to an unprivileged user on the filesystem holding ``path``."""
    return disk_space(path)[1]


def disk_space(path: Path | str) -> tuple[int, int]:
    """(capacity, available) bytes of the filesystem holding ``path``."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


class SpaceGuard:
    """Cached free-space check used on every write."""

    def __init__(
        self,
        path: Path,
        threshold: int,
        interval: float,
        monotonic: Callable[[], float],
        probe: Callable[[Path], tuple[int, int]] = disk_space,
    ) -> None:
        self._path = path
        self._threshold = threshold
        self._interval = interval
        self._monotonic = monotonic
        self._probe = probe
        self._checked_at: float | None = None
        self._capacity = self._available = 0

    @property
    def available(self) -> int:
        """Free bytes as of the last check."""
        self._refresh()
        return self._available

    @property
    def capacity(self) -> int:
        """Filesystem size as of the last check."""
        self._refresh()
        return self._capacity

    def writable_for(self, header: BinlogHeader) -> bool:
        """May ``header``'s binlog be stored now? Only prewrites are ever refused."""
        if header.tp != BinlogType.Prewrite:
            return True
        return self.available > self._threshold

    def _refresh(self) -> None:
        now = self._monotonic()
        if self._checked_at is None or now - self._checked_at >= self._interval:
            self._capacity, self._available = self._probe(self._path)
            self._checked_at = now
