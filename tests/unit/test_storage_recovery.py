"""Storage recovery and failure paths: torn tail, flipped byte, lost index, failed batches."""

from __future__ import annotations

import asyncio
import resource
import signal
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from services.pump.storage import PulledBinlog, Storage, StorageError, StorageSettings
from services.pump.storage.record import HEADER_SIZE, Found, encode, scan
from tests.support.pump_binlogs import Clock, commit, fake, prewrite, ts

SETTINGS = StorageSettings(stop_write_at_available_space=0)


async def take(storage: Storage, n: int) -> list[int]:
    out: list[PulledBinlog] = []

    async def run() -> None:
        async for b in storage.pull(0):
            out.append(b)
            if len(out) == n:
                return

    await asyncio.wait_for(run(), timeout=10)
    return [b.commit_ts for b in out]


def drop_index(tmp_path: Path) -> None:
    for f in tmp_path.glob("index.db*"):
        f.unlink()


def segment(tmp_path: Path) -> Path:
    return tmp_path / "value" / "000000.vlog"


async def test_torn_tail_from_a_crash_is_truncated_and_new_writes_follow(tmp_path: Path) -> None:
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        await s.write([fake(ts(1))])
        await s.write([fake(ts(2))])
    good = segment(tmp_path).stat().st_size
    torn = encode(fake(ts(3)).payload)[:-3]  # a crash in the middle of an unacknowledged append
    with segment(tmp_path).open("ab") as f:
        f.write(torn)
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        assert segment(tmp_path).stat().st_size == good
        assert s.stats.corrupt_bytes == len(torn) and s.stats.loss_binlog_count == 0
        await s.write([fake(ts(4))])
        assert await take(s, 3) == [ts(1), ts(2), ts(4)]
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        assert s.max_commit_ts == ts(4) and s.stats.corrupt_bytes == 0


async def test_flipped_byte_loses_only_its_record(tmp_path: Path) -> None:
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        for i in (1, 2, 3):
            await s.write([fake(ts(i))])
    data = bytearray(segment(tmp_path).read_bytes())
    records = [e for e in scan(bytes(data), 0, len(data)) if isinstance(e, Found)]
    assert len(records) == 3
    data[records[1].offset + HEADER_SIZE + 1] ^= 0x08
    segment(tmp_path).write_bytes(bytes(data))
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        assert s.stats.loss_binlog_count == 1 and s.stats.error_count["corrupt"] == 1
        assert s.stats.corrupt_bytes == records[1].end - records[1].offset
        assert await take(s, 2) == [ts(1), ts(3)]
        assert s.stats.error_count["read"] == 1  # the index still pointed at it
    drop_index(tmp_path)  # rebuild the index from the value log alone
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        assert s.stats.loss_binlog_count == 1
        assert await take(s, 2) == [ts(1), ts(3)]
        assert s.stats.error_count["read"] == 0


async def test_lost_index_is_rebuilt_with_pending_prewrites(tmp_path: Path) -> None:
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        await s.write([prewrite(ts(1)), commit(ts(1), ts(2))])
        await s.write([prewrite(ts(3))])
        await s.write([prewrite(ts(4)), commit(ts(4), ts(5))])
    drop_index(tmp_path)
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        assert s.max_commit_ts == ts(2) and not s.all_matched()
        await s.write([commit(ts(3), ts(6))])
        assert await take(s, 3) == [ts(2), ts(5), ts(6)]


async def test_failed_index_transaction_fails_the_batch_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        await s.write([fake(ts(1))])
        size = segment(tmp_path).stat().st_size
        with closing(sqlite3.connect(tmp_path / "index.db")) as db:
            db.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON binlog WHEN NEW.ts = ? "
                "BEGIN SELECT RAISE(ABORT, 'injected'); END".replace("?", str(ts(3)))
            )
            db.commit()
        results = await asyncio.gather(
            s.write([fake(ts(2))]), s.write([fake(ts(3))]), return_exceptions=True
        )
        assert all(isinstance(r, StorageError) and r.retriable for r in results), results
        assert segment(tmp_path).stat().st_size == size  # the batch was cut off again
        assert await s.get(ts(2)) is None and s.max_commit_ts == ts(1)
        assert s.stats.error_count["index"] == 1
        with closing(sqlite3.connect(tmp_path / "index.db")) as db:
            db.execute("DROP TRIGGER boom")
            db.commit()
        await s.write([fake(ts(4))])
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        assert await take(s, 2) == [ts(1), ts(4)]


SetLimit = Callable[[int], None]


@pytest.fixture
def file_size_limit() -> Iterator[SetLimit]:
    """Set RLIMIT_FSIZE for the duration of a block (writes beyond it fail with EFBIG)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def set_limit(limit: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    try:
        yield set_limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


async def test_failed_append_is_rolled_back_and_reported_not_retriable(
    tmp_path: Path, file_size_limit: SetLimit
) -> None:
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        await s.write([fake(ts(1))])
        size = segment(tmp_path).stat().st_size
        big = prewrite(ts(2), value=b"x" * 4000)
        file_size_limit(size + 1000)  # the batch is written partly, then EFBIG
        try:
            with pytest.raises(StorageError) as err:
                await s.write([big, commit(ts(2), ts(3))])
        finally:
            file_size_limit(resource.RLIM_INFINITY)
        assert err.value.retriable is False
        assert segment(tmp_path).stat().st_size == size
        assert s.stats.error_count["write"] == 1
        assert await s.get(ts(2)) is None
        await s.write([big, commit(ts(2), ts(3))])  # space is back: the same write succeeds
        assert s.max_commit_ts == ts(3)
    async with Storage.open(tmp_path, SETTINGS, latest_ts=Clock()) as s:
        assert await take(s, 2) == [ts(1), ts(3)]
