"""One contract for the drainer's ``CheckpointStore`` port, run against every implementation:
``FileCheckpoint`` (tidb-binlog's savepoint file) and ``MemoryCheckpoint``, the fake the drainer's
unit tests use (``tests.support.fakes``).

Every store: None before the first save, the last saved commit ts after; a failed save raises
a retriable ``CheckpointError``. Only the file store outlives its object (a new
one on the same directory reads it); the fake is memory only, said so below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.drainer.checkpoint import CheckpointStore, FileCheckpoint
from services.drainer.errors import CheckpointError
from tests.support.fakes import MemoryCheckpoint

TS = 449_812_345_678_901_249


@dataclass
class Harness:
    open: Callable[[], CheckpointStore]  # a store object on the same place
    persistent: bool  # a new object reads what an earlier one saved
    broken: Callable[[], CheckpointStore]  # a store whose saves fail


def _file(tmp_path: Path) -> Harness:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    return Harness(
        lambda: FileCheckpoint(tmp_path / "d"), True, lambda: FileCheckpoint(blocker / "sub")
    )


def _memory(tmp_path: Path) -> Harness:
    return Harness(MemoryCheckpoint, False, lambda: MemoryCheckpoint(fail=True))


@pytest.fixture(params=["file", "memory"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    return {"file": _file, "memory": _memory}[request.param](tmp_path)


async def test_round_trip(harness: Harness) -> None:
    store = harness.open()
    assert await store.load() is None
    await store.save(TS, False)
    assert await store.load() == TS
    await store.save(TS + 5, True)
    assert await store.load() == TS + 5


async def test_a_new_store_reads_what_the_last_one_saved(harness: Harness) -> None:
    await harness.open().save(TS, True)
    # The file store is durable; the fake keeps its checkpoint in the object only.
    assert await harness.open().load() == (TS if harness.persistent else None)


async def test_a_failed_save_is_a_checkpoint_error(harness: Harness) -> None:
    with pytest.raises(CheckpointError) as e:
        await harness.broken().save(TS, False)
    assert e.value.retriable  # the checkpointer stops; a restart may find the disk back
