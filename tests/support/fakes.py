"""In-memory fakes of our own ports (CheckpointStore, Sink) for unit tests of pure logic; each
records what it was given."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from services.drainer.errors import CheckpointError
from tributary.change import Txn
from tributary.sinks import SinkError as DownstreamError
from tributary.tso.errors import NotLeader


class MemoryCheckpoint:
    """A CheckpointStore in memory that records every save."""

    def __init__(
        self, saved: int | None = None, fail: bool = False, retriable: bool = True
    ) -> None:
        self.saved = saved
        self.history: list[tuple[int, bool]] = []
        self.fail = fail
        self.retriable = retriable
        self.failures = 0

    async def load(self) -> int | None:
        return self.saved

    async def save(self, commit_ts: int, consistent: bool) -> None:
        await asyncio.sleep(0)
        if self.fail:
            self.failures += 1
            raise CheckpointError("disk on fire", retriable=self.retriable)
        self.saved = commit_ts
        self.history.append((commit_ts, consistent))


class RecordingSink:
    """A Sink that records batches and the safe mode each was applied in; can fail on demand."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.modes: list[bool] = []
        self.failures: list[DownstreamError] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.safe_mode = False
        self.ckpt: int | None = None

    async def apply(self, txns: Sequence[Txn]) -> None:
        await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)
        self.batches.append([t.commit_ts for t in txns])
        self.modes.append(self.safe_mode)
        self.ckpt = txns[-1].commit_ts

    async def checkpoint(self) -> int | None:
        return self.ckpt

    async def close(self) -> None:
        pass


class PipelinedRecordingSink(RecordingSink):
    """A pipelined sink (``tributary.sinks.Pipelined``) whose acks come one batch late: each
    ``submit`` acknowledges the batches before it; ``flush`` sets ``flushing``, waits for
    ``gate`` and then acknowledges everything, or raises the first of ``flush_failures``.
    ``apply`` is the recording sink's (what a retry after a failure uses)."""

    def __init__(self) -> None:
        super().__init__()
        self.submitted: list[list[int]] = []
        self.flush_failures: list[DownstreamError] = []
        self.queued: int | None = None
        self.flushing = asyncio.Event()

    async def submit(self, txns: Sequence[Txn]) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.ckpt = self.queued
        self.submitted.append([t.commit_ts for t in txns])
        self.queued = txns[-1].commit_ts

    async def flush(self) -> None:
        self.flushing.set()
        await self.gate.wait()
        if self.flush_failures:
            raise self.flush_failures.pop(0)
        self.ckpt = self.queued


class MemoryWindowStore:
    """The persisted window; ``deposed`` makes saves fail like a lost etcd guard."""

    def __init__(self, saved: int | None = None) -> None:
        self.saved = saved
        self.saves: list[int] = []
        self.deposed = False

    async def load(self) -> int | None:
        return self.saved

    async def save(self, window_ms: int) -> None:
        if self.deposed:
            raise NotLeader(None)
        self.saved = window_ms
        self.saves.append(window_ms)
