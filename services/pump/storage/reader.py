"""Reading sorted binlogs back: the pull stream and single lookups.

Invariant: :func:`read_commits` returns, in commit-ts order, exactly the
commit and fake binlogs indexed in ``(after, upto]`` that can be served: a
commit gets its prewrite's value and DDL fields attached; a commit whose
prewrite is missing or a record that fails its CRC is logged, counted and
left out (it is never served half-built).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from dataclasses import dataclass

from services.pump.storage.index import CommitRow, Index
from services.pump.storage.splice import attach_prewrite
from services.pump.storage.stats import StorageStats
from services.pump.storage.vlog import ValueLog
from tributary.wire.peek import MalformedBinlog

log = logging.getLogger(__name__)

PULL_CHUNK = 512  # index rows per query while pulling


@dataclass(frozen=True, slots=True)
class PulledBinlog:
    """A commit (with its prewrite's data attached) or a fake binlog, ready to send."""

    commit_ts: int
    start_ts: int
    payload: bytes


class Reader:
    def __init__(self, index: Index, vlog: ValueLog, stats: StorageStats, executor: Executor):
        self._index = index
        self._vlog = vlog
        self._stats = stats
        self._executor = executor

    async def read_commits(self, after: int, upto: int) -> tuple[list[PulledBinlog], int]:
        """Up to a chunk of binlogs in ``(after, upto]`` and the ts the chunk covers up to."""
        rows = await self._index.commits(after, upto, PULL_CHUNK)
        if not rows:
            return [], upto
        wanted = [r.where for r in rows] + [r.prewrite for r in rows if r.prewrite is not None]
        loop = asyncio.get_running_loop()
        payloads = await loop.run_in_executor(self._executor, self._vlog.read_many, wanted)
        records = dict(zip(wanted, payloads, strict=True))
        out = []
        for row in rows:
            binlog = self._build(row, records)
            if binlog is not None:
                out.append(binlog)
        covered = rows[-1].ts if len(rows) == PULL_CHUNK else upto
        return out, covered

    def _build(
        self, row: CommitRow, records: dict[tuple[int, int, int], bytes | None]
    ) -> PulledBinlog | None:
        payload = records[row.where]
        if payload is None:
            self._lost(row.ts)
            return None
        if row.kind != 1:  # a fake binlog passes through unchanged
            return PulledBinlog(row.ts, row.start_ts, payload)
        if row.prewrite is None:
            self._stats.error_count["missing_prewrite"] += 1
            log.warning(
                "Matching P-binlog not found: commit_ts=%d start_ts=%d skipped",
                row.ts,
                row.start_ts,
            )
            return None
        prewrite = records[row.prewrite]
        if prewrite is None:
            self._lost(row.start_ts)
            return None
        try:
            return PulledBinlog(row.ts, row.start_ts, attach_prewrite(payload, prewrite))
        except MalformedBinlog as e:
            self._lost(row.ts)
            log.error("commit_ts=%d: cannot attach its prewrite: %s", row.ts, e)
            return None

    def _lost(self, ts: int) -> None:
        self._stats.error_count["read"] += 1
        log.error("binlog ts=%d is unreadable (corrupt or purged) and is skipped", ts)

    async def get(self, ts: int) -> bytes | None:
        where = await self._index.lookup(ts)
        if where is None:
            return None
        loop = asyncio.get_running_loop()
        (payload,) = await loop.run_in_executor(self._executor, self._vlog.read_many, [where])
        return payload
