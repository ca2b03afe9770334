"""The checkpoint: the savepoint file (ours, binlogctl's and tidb-binlog's formats), where a start
begins, the save rate, and the syncer that advances it only after the sink took a binlog."""

from __future__ import annotations

import asyncio
import tomllib
from datetime import UTC
from pathlib import Path

import pytest

from services.binlogctl.meta import savepoint_text, write_savepoint
from services.drainer.checkpoint import (
    FileCheckpoint,
    parse_savepoint,
    render_savepoint,
    start_ts,
)
from services.drainer.errors import CheckpointError
from services.drainer.progress import Checkpointer
from tests.support.fakes import MemoryCheckpoint
from tests.support.waits import eventually

TS = 449_812_345_678_901_249


def read_text(path: Path) -> str:
    return path.read_text()


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the savepoint file ------------------------------------------------------------


async def test_file_is_tidb_binlog_toml_and_replaced_whole(tmp_path: Path) -> None:
    store = FileCheckpoint(tmp_path)
    await store.save(TS, True)
    doc = tomllib.loads(await asyncio.to_thread(read_text, store.path))
    assert doc == {"consistent": True, "commitTS": TS}
    await store.save(TS + 1, False)
    assert await asyncio.to_thread(names, tmp_path) == ["savepoint"]  # no temp files left
    fresh = FileCheckpoint(tmp_path)
    assert await fresh.load() == TS + 1 and fresh.consistent is False


async def test_reads_what_binlogctl_generate_meta_writes(tmp_path: Path) -> None:
    write_savepoint(tmp_path, savepoint_text(TS, UTC))
    store = FileCheckpoint(tmp_path)
    assert await store.load() == TS and store.consistent is False


def test_reads_tidb_binlog_s_bare_time_lines() -> None:
    text = (
        f"commitTS = {TS}\n"
        "2024-05-16 12:27:19.742 +0000 UTC\n"
        "UTC: 2024-05-16 12:27:19.742 +0000 UTC\n"
    )
    assert parse_savepoint(text) == (TS, False)
    assert parse_savepoint(render_savepoint(7, True)) == (7, True)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "commitTS = -3\n",
        'commitTS = "12"\n',
        "consistent = 1\ncommitTS = 5\n",
        "commitTS = true",
    ],
)
def test_a_savepoint_without_a_valid_commit_ts_is_an_error(text: str) -> None:
    with pytest.raises(CheckpointError, match="savepoint"):
        parse_savepoint(text)


async def test_unwritable_directory_is_a_checkpoint_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CheckpointError, match="cannot write"):
        await FileCheckpoint(blocker / "sub").save(1, False)


async def test_start_ts_prefers_the_saved_checkpoint() -> None:
    async def tso() -> int:
        return 999

    async def no_tso() -> int:
        raise AssertionError("the TSO must not be asked")

    assert await start_ts(50, -1, no_tso) == (50, True)
    assert await start_ts(50, 7, no_tso) == (50, True)
    assert await start_ts(None, -1, tso) == (999, False)
    assert await start_ts(None, 0, no_tso) == (0, False)
    assert await start_ts(None, 12, no_tso) == (12, False)
    with pytest.raises(CheckpointError):
        await start_ts(None, -2, no_tso)


# -- save rate -----------------------------------------------------------------------


async def test_saves_at_most_once_per_interval() -> None:
    clock = ManualClock()
    store = MemoryCheckpoint()
    cp = Checkpointer(store, 100, interval=3.0, clock=clock)
    assert cp.due_in() is None  # nothing applied
    cp.advance(105)
    due = cp.due_in()
    assert due is not None and due <= 0  # nothing saved for long: now
    await cp.save()
    assert (cp.saved_ts, cp.due_in()) == (105, None)
    clock.now += 1
    cp.advance(107)
    cp.advance(110)
    assert cp.due_in() == pytest.approx(2.0)
    clock.now += 2
    assert cp.due_in() == pytest.approx(0.0)
    await cp.save()
    assert store.history == [(105, False), (110, False)]
    with pytest.raises(ValueError, match="cannot go"):
        cp.advance(110)


async def test_run_saves_promptly_then_waits_and_saves_consistent_at_close() -> None:
    store = MemoryCheckpoint()
    cp = Checkpointer(store, 100, interval=3600)
    task = asyncio.create_task(cp.run(), name="test-checkpointer")
    try:
        cp.advance(105)
        await eventually(lambda: cp.saved_ts == 105)
        cp.advance(106)
        cp.advance(109)
        await asyncio.sleep(0.05)
        assert cp.saved_ts == 105  # the next periodic save is an hour away
        cp.close(consistent=True)
        await asyncio.wait_for(task, 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert store.history == [(105, False), (109, True)]
    assert (cp.saved_ts, cp.applied_ts, cp.saves) == (109, 109, 2)


async def test_a_save_failing_for_good_stops_the_checkpointer() -> None:
    cp = Checkpointer(MemoryCheckpoint(fail=True, retriable=False), 1)
    cp.advance(2)
    with pytest.raises(CheckpointError):
        await asyncio.wait_for(cp.run(), 10)
    assert cp.saved_ts == 1


async def test_a_save_that_may_pass_is_retried_and_the_old_checkpoint_stays() -> None:
    store = MemoryCheckpoint(fail=True)  # a full disk: retriable
    cp = Checkpointer(store, 1, interval=3600, retry_delay=0.001)
    cp.advance(2)
    task = asyncio.create_task(cp.run())
    try:
        await eventually(lambda: store.failures >= 3)
        assert cp.saved_ts == 1 and store.saved is None and not task.done()
        store.fail = False  # space returned
        await eventually(lambda: cp.saved_ts == 2)
        cp.close(consistent=True)
        await asyncio.wait_for(task, 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert store.history == [(2, False), (2, True)]
