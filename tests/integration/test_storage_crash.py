"""Crash safety: kill -9 a writing process, reopen, and get back every acknowledged binlog.

A writer process (``tests/support/storage_writer.py``) runs concurrent
transactions with fsync on and small segments (so rotation happens too) and
prints each acknowledgement. It is SIGKILLed mid-stream, twice; after each kill
the storage is reopened in this process. Every acknowledged commit and fake
binlog must be pulled back, in commit-ts order, once, each commit carrying its
own prewrite's value; rolled-back and unfinished transactions must not appear,
and the unfinished ones (some are abandoned on purpose) must not stall the
max commit ts once they time out.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path

from services.pump.storage import PulledBinlog, RollbackResolver, Storage
from tests.support.pump_binlogs import Clock
from tests.support.storage_writer import SETTINGS
from tributary.wire import ts
from tributary.wire.binlog import Binlog, BinlogType, PrewriteValue

ROOT = Path(__file__).resolve().parents[2]
FAR_FUTURE = Clock(ts.compose(2**42, 0))  # every unfinished prewrite looks timed out


@dataclass
class Acks:
    commits: dict[int, int] = field(default_factory=dict)  # commit_ts -> start_ts
    fakes: set[int] = field(default_factory=set)
    rollbacks: set[int] = field(default_factory=set)
    abandoned: set[int] = field(default_factory=set)

    def count(self) -> int:
        return len(self.commits) + len(self.fakes) + len(self.rollbacks)


async def run_and_kill(data_dir: Path, acks: Acks, kill_after: int) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.storage_writer",
        str(data_dir),
        "32",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    seen = 0
    try:
        while seen < kill_after:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, "writer exited early"
            kind, *nums = line.decode().split()
            if kind == "commit":
                acks.commits[int(nums[1])] = int(nums[0])
            elif kind == "fake":
                acks.fakes.add(int(nums[0]))
            elif kind == "abandoned":
                acks.abandoned.add(int(nums[0]))
            else:
                acks.rollbacks.add(int(nums[0]))
            seen += 1
    finally:
        proc.kill()  # SIGKILL while the writers are mid-stream
        await proc.wait()


async def pull_everything(storage: Storage) -> list[PulledBinlog]:
    out: list[PulledBinlog] = []
    target = storage.max_commit_ts

    async def run() -> None:
        async for b in storage.pull(0):
            out.append(b)
            if b.commit_ts >= target:
                return

    if target:
        await asyncio.wait_for(run(), 30)
    return out


async def check(data_dir: Path, acks: Acks, abandoned: int) -> None:
    async with Storage.open(
        data_dir, SETTINGS, RollbackResolver(), latest_ts=FAR_FUTURE
    ) as storage:
        if abandoned:
            assert not storage.all_matched()  # at least the abandoned prewrites wait
        # Unfinished transactions time out and are rolled back, so the max moves past them.
        assert await storage.resolve_expired() >= abandoned
        assert storage.all_matched()
        pulled = await pull_everything(storage)
    commit_ts = [b.commit_ts for b in pulled]
    assert commit_ts == sorted(set(commit_ts)), "out of order or duplicated"
    got = set(commit_ts)
    assert set(acks.commits) <= got, f"lost {len(set(acks.commits) - got)} acknowledged commits"
    assert acks.fakes <= got, "lost acknowledged fake binlogs"
    for b in pulled:
        binlog = Binlog().parse(b.payload)
        assert binlog.commit_ts == b.commit_ts and binlog.start_ts == b.start_ts
        if binlog.tp == BinlogType.Commit:
            assert b.start_ts not in acks.rollbacks | acks.abandoned
            rows = PrewriteValue().parse(binlog.prewrite_value).mutations[0].inserted_rows
            assert rows == [b"v%d" % b.start_ts]
        else:
            assert binlog.start_ts == binlog.commit_ts  # a fake binlog


async def test_every_acknowledged_binlog_survives_kill_9(tmp_path: Path) -> None:
    acks = Acks()
    for round_ in (1, 2):
        before = len(acks.abandoned)
        await run_and_kill(tmp_path, acks, kill_after=600 * round_)
        await check(tmp_path, acks, abandoned=len(acks.abandoned) - before)
    segments = list((tmp_path / "value").glob("*.vlog"))
    assert len(segments) > 2  # rotation happened under the kills too
    assert len(acks.commits) > 500 and acks.rollbacks and acks.abandoned
