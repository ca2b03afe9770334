"""What a pump holds above a ts: ``Index.count_commits`` on a real SQLite index and
``Storage.backlog`` on a real storage (value log + index + sorter) in a temp directory."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.pump.storage import Storage, StorageClosed, StorageSettings
from services.pump.storage.index import Index
from services.pump.storage.segment import Pointer
from tests.support.pump_binlogs import Clock, commit, fake, prewrite, rollback, ts
from tributary.wire.binlog import BinlogType

SMALL = StorageSettings(segment_size=4096, stop_write_at_available_space=0)
P, C, FAKE = int(BinlogType.Prewrite), int(BinlogType.Commit), int(BinlogType.Rollback)


async def test_count_commits_counts_commit_rows_in_the_half_open_range(tmp_path: Path) -> None:
    pool = ThreadPoolExecutor(1)
    index = await Index.open(tmp_path / "index.db", pool)
    try:
        # txn 10->20, txn 30->40, fake 50, txn 60->70, a prewrite 80 still open, fake 90
        rows = [
            (10, P, 0, 0, 1, 10),
            (20, C, 0, 1, 1, 10),
            (30, P, 0, 2, 1, 30),
            (40, C, 0, 3, 1, 30),
            (50, FAKE, 0, 4, 1, 50),
            (60, P, 0, 5, 1, 60),
            (70, C, 0, 6, 1, 60),
            (80, P, 0, 7, 1, 80),
            (90, FAKE, 0, 8, 1, 90),
        ]
        await index.put_batch(rows, Pointer(0, 9))
        assert await index.count_commits(0, 100) == 3  # prewrites and fakes not counted
        assert await index.count_commits(20, 100) == 2  # after is exclusive
        assert await index.count_commits(19, 40) == 2  # upto is inclusive
        assert await index.count_commits(40, 69) == 0
        assert await index.count_commits(0, 0) == 0
        assert await index.count_commits(70, 20) == 0  # an empty range
        # GC deleted the rows up to 40: they are no longer held
        await index.delete_upto(40, 100)
        assert await index.count_commits(0, 100) == 1
    finally:
        await index.close()
        pool.shutdown()


async def test_backlog_counts_pullable_transactions_only(tmp_path: Path) -> None:
    async with Storage.open(tmp_path, SMALL, latest_ts=Clock()) as storage:
        assert await storage.backlog(0) == (0, storage.max_commit_ts)
        await storage.write([prewrite(ts(1)), commit(ts(1), ts(2))])
        await storage.write([prewrite(ts(3))])  # open: the max commit ts waits below it
        await storage.write([prewrite(ts(4)), commit(ts(4), ts(5)), fake(ts(6))])
        assert await storage.backlog(0) == (1, ts(2))  # txn 4->5 is not pullable yet
        await storage.write([rollback(ts(3))])
        await storage.write([prewrite(ts(7)), commit(ts(7), ts(8)), fake(ts(9))])
        assert storage.max_commit_ts == ts(9)
        assert await storage.backlog(0) == (3, ts(9))  # 2, 5 and 8; fakes 6, 9 not counted
        assert await storage.backlog(ts(2)) == (2, ts(9))
        assert await storage.backlog(ts(8)) == (0, ts(9))
        assert await storage.backlog(ts(100)) == (0, ts(9))
    with pytest.raises(StorageClosed) as closed:
        await storage.backlog(0)
    assert closed.value.retriable
