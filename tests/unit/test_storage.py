"""Storage behaviour through its public API: write, pull, get, resolve, GC, space guard."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.pump.storage import (
    PulledBinlog,
    Resolution,
    RollbackResolver,
    Storage,
    StorageClosed,
    StorageFull,
    StorageSettings,
    WriteItem,
    available_space,
)
from services.pump.storage.settings import SpaceGuard, disk_space
from tests.support.pump_binlogs import Clock, commit, fake, item, prewrite, rollback, ts
from tributary.wire.binlog import Binlog, BinlogType, PrewriteValue

SMALL = StorageSettings(segment_size=4096, stop_write_at_available_space=0)


async def take(storage: Storage, after: int, n: int) -> list[PulledBinlog]:
    """The first ``n`` binlogs pulled after ``after`` (fails the test if they never come)."""
    out: list[PulledBinlog] = []

    async def run() -> None:
        async for b in storage.pull(after):
            out.append(b)
            if len(out) == n:
                return

    await asyncio.wait_for(run(), timeout=10)
    return out


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    async with Storage.open(tmp_path, SMALL, latest_ts=Clock()) as s:
        yield s


async def test_commit_is_pulled_with_its_prewrite_value_and_ddl_fields(storage: Storage) -> None:
    p = prewrite(ts(1), value=b"row-1", ddl_job_id=42)
    await storage.write([p])
    await storage.write([commit(ts(1), ts(2))])
    f = fake(ts(3))
    await storage.write([f])
    got = await take(storage, 0, 2)
    assert [(b.commit_ts, b.start_ts) for b in got] == [(ts(2), ts(1)), (ts(3), ts(3))]
    merged = Binlog().parse(got[0].payload)
    original = Binlog().parse(p.payload)
    assert merged.tp == BinlogType.Commit
    assert (merged.start_ts, merged.commit_ts) == (ts(1), ts(2))
    assert merged.prewrite_value == original.prewrite_value
    rows = PrewriteValue().parse(merged.prewrite_value).mutations[0].inserted_rows
    assert rows == [b"row-1"]
    assert (merged.ddl_query, merged.ddl_job_id) == (b"create table t (a int)", 42)
    assert merged.prewrite_key == b""  # a commit binlog carries no key
    assert got[1].payload == f.payload  # fake binlogs pass through unchanged


async def test_pull_waits_behind_a_pending_prewrite_then_streams_in_commit_order(
    storage: Storage,
) -> None:
    await storage.write([prewrite(ts(1))])
    await storage.write([prewrite(ts(2))])
    await storage.write([commit(ts(2), ts(4))])
    assert storage.max_commit_ts == 0 and not storage.all_matched()
    puller = asyncio.create_task(take(storage, 0, 2), name="test-puller")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not puller.done()  # nothing is sorted yet
    await storage.write([commit(ts(1), ts(3))])
    got = await puller
    assert [b.commit_ts for b in got] == [ts(3), ts(4)]
    assert storage.max_commit_ts == ts(4) and storage.all_matched()


async def test_rollback_matches_its_prewrite_and_has_no_index_row(storage: Storage) -> None:
    await storage.write([prewrite(ts(1))])
    await storage.write([fake(ts(2))])
    assert storage.max_commit_ts == 0
    await storage.write([rollback(ts(1))])
    assert storage.max_commit_ts == ts(2) and storage.all_matched()
    assert [b.commit_ts for b in await take(storage, 0, 1)] == [ts(2)]
    assert await storage.get(0) is None


async def test_pull_wakes_on_new_binlogs_and_ends_at_close(tmp_path: Path) -> None:
    async with Storage.open(tmp_path, SMALL, latest_ts=Clock()) as s:
        await s.write([fake(ts(1))])
        seen: list[int] = []
        woken = asyncio.Event()

        async def puller() -> None:
            async for b in s.pull(ts(1)):
                seen.append(b.commit_ts)
                woken.set()

        task = asyncio.create_task(puller(), name="test-puller")
        for _ in range(20):
            await asyncio.sleep(0)
        assert seen == []
        await s.write([fake(ts(2))])
        await asyncio.wait_for(woken.wait(), 10)
        assert seen == [ts(2)]
        await s.close()
        await asyncio.wait_for(task, 10)  # the stream ended by itself


async def test_commit_without_its_prewrite_is_skipped_and_counted(storage: Storage) -> None:
    await storage.write([commit(ts(1), ts(2))])
    await storage.write([fake(ts(3))])
    assert [b.commit_ts for b in await take(storage, 0, 1)] == [ts(3)]
    assert storage.stats.error_count["missing_prewrite"] == 1


async def test_get_returns_a_binlog_by_its_key(storage: Storage) -> None:
    p, c = prewrite(ts(1)), commit(ts(1), ts(2))
    await storage.write([p, c])
    assert await storage.get(ts(1)) == p.payload
    assert await storage.get(ts(2)) == c.payload
    assert await storage.get(ts(9)) is None


async def test_concurrent_writes_are_group_committed(storage: Storage) -> None:
    await asyncio.gather(*(storage.write([fake(ts(1, i))]) for i in range(1, 201)))
    stats = storage.stats
    assert stats.binlogs_written == 200
    assert stats.batches < 200
    assert stats.write_binlog_size["batch"].count == stats.batches
    assert stats.write_binlog_size["single"].count == 200
    assert stats.write_binlog_duration_time["single"].count == 200
    assert stats.write_binlog_duration_time["fsync"].count == stats.batches
    assert stats.max_commit_ts == ts(1, 200)
    got = await take(storage, 0, 200)
    assert [b.commit_ts for b in got] == [ts(1, i) for i in range(1, 201)]


async def test_probe_binlog_is_accepted_and_not_stored(storage: Storage) -> None:
    await storage.write([item(b"")])
    assert storage.stats.batches == 0


async def test_low_disk_space_refuses_prewrites_but_not_commits(tmp_path: Path) -> None:
    full = StorageSettings(stop_write_at_available_space=1 << 62)
    async with Storage.open(tmp_path, full, latest_ts=Clock()) as s:
        p = prewrite(ts(1))
        assert not s.writable_for(p.header)
        with pytest.raises(StorageFull) as err:
            await s.write([fake(ts(2)), p])
        assert err.value.retriable is False
        assert s.stats.batches == 0  # nothing of the refused request was stored
        for x in (commit(ts(1), ts(3)), rollback(ts(4)), fake(ts(5))):
            assert s.writable_for(x.header)
            await s.write([x])
        assert s.max_commit_ts == ts(5)


async def test_write_after_close_is_refused(tmp_path: Path) -> None:
    async with Storage.open(tmp_path, SMALL, latest_ts=Clock()) as s:
        await s.close()
        with pytest.raises(StorageClosed) as err:
            await s.write([fake(ts(1))])
        assert err.value.retriable


async def test_timed_out_prewrite_is_rolled_back_by_the_rollback_resolver(tmp_path: Path) -> None:
    clock = Clock(ts(0))
    async with Storage.open(tmp_path, SMALL, RollbackResolver(), latest_ts=clock) as s:
        await s.write([prewrite(ts(10))])
        await s.write([prewrite(ts(11)), commit(ts(11), ts(12))])
        clock.now = ts(10 + 599)
        assert await s.resolve_expired() == 0
        assert s.max_commit_ts == 0
        clock.now = ts(10 + 601)
        assert await s.resolve_expired() == 1
        assert s.max_commit_ts == ts(12) and s.all_matched()
        assert s.stats.resolved["rolled_back"] == 1
        # The rolled-back transaction has no commit to pull; the other one does.
        assert [b.start_ts for b in await take(s, 0, 1)] == [ts(11)]


async def test_by_default_a_timed_out_prewrite_waits_and_is_reported_stuck(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(ts(0))
    async with Storage.open(tmp_path, SMALL, latest_ts=clock) as s:
        await s.write([prewrite(ts(10))])
        await s.write([prewrite(ts(11)), commit(ts(11), ts(12))])
        clock.now = ts(10 + 601)
        with caplog.at_level(logging.ERROR):
            assert await s.resolve_expired() == 0
            assert await s.resolve_expired() == 0
        assert s.max_commit_ts == 0 and not s.all_matched()
        assert s.stats.stuck_prewrites == [ts(10)] and not s.stats.resolved
        errors = [r for r in caplog.records if str(ts(10)) in r.getMessage()]
        assert len(errors) == 1 and errors[0].levelno == logging.ERROR  # once, naming it
        # The commit comes late: nothing was lost, both transactions pull in order.
        await s.write([commit(ts(10), ts(13))])
        await s.resolve_expired()
        assert s.stats.stuck_prewrites == [] and s.max_commit_ts == ts(13)
        assert [b.start_ts for b in await take(s, 0, 2)] == [ts(11), ts(10)]


class ScriptedResolver:
    def __init__(self, *answers: Resolution) -> None:
        self.answers = list(answers)
        self.asked: list[int] = []

    async def resolve(self, start_ts: int) -> Resolution:
        self.asked.append(start_ts)
        return self.answers.pop(0)


async def test_resolver_commit_answer_stores_a_commit_binlog(tmp_path: Path) -> None:
    clock = Clock(ts(0))
    resolver = ScriptedResolver(Resolution.running(), Resolution.committed(ts(20)))
    async with Storage.open(tmp_path, SMALL, resolver, latest_ts=clock) as s:
        await s.write([prewrite(ts(10), value=b"v")])
        clock.now = ts(1000)
        assert await s.resolve_expired() == 0  # still running: keep waiting
        assert not s.all_matched()
        assert await s.resolve_expired() == 1
        assert resolver.asked == [ts(10), ts(10)]
        assert s.max_commit_ts == ts(20) and s.all_matched()
        (b,) = await take(s, 0, 1)
        merged = Binlog().parse(b.payload)
        assert (merged.tp, merged.start_ts, merged.commit_ts) == (BinlogType.Commit, ts(10), ts(20))
        assert (
            merged.prewrite_value
            == Binlog().parse(prewrite(ts(10), value=b"v").payload).prewrite_value
        )


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    async with Storage.open(tmp_path, SMALL, latest_ts=Clock()) as s:
        await s.write([prewrite(ts(1)), commit(ts(1), ts(2))])
        await s.write([prewrite(ts(3))])  # still pending at close
        await s.write([prewrite(ts(4)), commit(ts(4), ts(5))])
        assert s.max_commit_ts == ts(2)
    async with Storage.open(tmp_path, SMALL, latest_ts=Clock()) as s:
        assert s.max_commit_ts == ts(2) and not s.all_matched()
        await s.write([commit(ts(3), ts(6))])
        assert s.max_commit_ts == ts(6) and s.all_matched()
        got = await take(s, 0, 3)
        assert [b.commit_ts for b in got] == [ts(2), ts(5), ts(6)]


def _rows(tmp_path: Path) -> int:
    import sqlite3

    with sqlite3.connect(tmp_path / "index.db") as db:
        return int(db.execute("SELECT count(*) FROM binlog").fetchone()[0])


async def test_gc_removes_old_rows_and_segments_and_ignores_unsafe_requests(
    tmp_path: Path,
) -> None:
    settings = StorageSettings(segment_size=16, stop_write_at_available_space=0)
    async with Storage.open(tmp_path, settings, latest_ts=Clock()) as s:
        for sec in range(0, 2000, 100):  # one batch (and one segment) per fake binlog
            await s.write([fake(ts(sec))])
        assert s.max_commit_ts == ts(1900)
        segments = len(list((tmp_path / "value").glob("*.vlog")))
        await s.gc(ts(1900))  # not below the max commit ts: unsafe
        await s.gc(ts(5000))
        assert s.gc_ts == 0 and _rows(tmp_path) == 20
        await s.gc(ts(1450))  # keeps a 600 s margin: deletes ts <= ts(850)
        assert s.gc_ts == ts(1450) and s.stats.done_gc_ts == ts(850)
        assert _rows(tmp_path) == 11 and s.stats.deleted_kv_total == 9
        assert await s.get(ts(800)) is None and await s.get(ts(900)) is not None
        left = len(list((tmp_path / "value").glob("*.vlog")))
        assert left == segments - 9
        await s.gc(ts(1000))  # below the current gc ts: ignored
        assert s.gc_ts == ts(1450)
        # A pull from before the gc ts starts at the gc ts.
        assert [b.commit_ts for b in await take(s, 0, 2)] == [ts(1500), ts(1600)]
    async with Storage.open(tmp_path, settings, latest_ts=Clock()) as s:
        assert s.gc_ts == ts(1450) and s.max_commit_ts == ts(1900)


async def test_write_items_keep_their_order_within_a_request(storage: Storage) -> None:
    items: list[WriteItem] = []
    for i in range(1, 6):
        items += [prewrite(ts(i, 1)), commit(ts(i, 1), ts(i, 2))]
    await storage.write(items)
    assert storage.max_commit_ts == ts(5, 2)
    assert [b.start_ts for b in await take(storage, 0, 5)] == [ts(i, 1) for i in range(1, 6)]


async def test_background_upkeep_resolves_timed_out_prewrites(tmp_path: Path) -> None:
    clock = Clock(ts(0))
    async with Storage.open(tmp_path, SMALL, RollbackResolver(), latest_ts=clock) as s:
        await s.write([prewrite(ts(1)), fake(ts(2))])
        assert s.max_commit_ts == 0
        clock.now = ts(1000)
        got = await take(s, 0, 1)  # the upkeep task (about once a second) releases it
        assert [b.commit_ts for b in got] == [ts(2)]
        assert s.stats.resolved["rolled_back"] == 1


def test_space_guard_asks_the_filesystem_at_most_once_per_interval() -> None:
    now = [0.0]
    answers = [(100, 50), (100, 5)]
    calls: list[Path] = []

    def probe(path: Path) -> tuple[int, int]:
        calls.append(path)
        return answers[min(len(calls), len(answers)) - 1]

    guard = SpaceGuard(Path("/data"), 10, 3.0, lambda: now[0], probe)
    p, c = prewrite(ts(1)).header, commit(ts(1), ts(2)).header
    assert guard.writable_for(p) and guard.available == 50
    now[0] = 2.9
    assert guard.writable_for(p) and len(calls) == 1
    now[0] = 3.0
    assert not guard.writable_for(p) and len(calls) == 2
    assert guard.writable_for(c)  # commits are always accepted
    assert guard.capacity == 100


def test_available_space_reads_the_filesystem(tmp_path: Path) -> None:
    assert 0 < available_space(tmp_path) <= disk_space(tmp_path)[0]
