"""The drainer's syncer and converter: batches into the sink, markers, retries, safe mode,
ignored and filtered binlogs, waiting for a DDL job, and stopping on bad input."""

from __future__ import annotations

import asyncio

import pytest

from services.drainer.convert import Converter
from services.drainer.errors import SinkError
from services.drainer.item import PulledBinlogItem
from services.drainer.progress import Checkpointer
from services.drainer.schema import UnknownTable
from services.drainer.syncer import Syncer, compact
from services.drainer.translate import DdlJobMissing
from tests.support.ddl_jobs import T1, create_db, create_table
from tests.support.drainer_binlogs import ddl, dml, history_with, insert, mutation
from tests.support.fakes import MemoryCheckpoint, PipelinedRecordingSink, RecordingSink
from tributary.change import RowChange, TableFilter, TableInfo, Txn
from tributary.sinks import SinkError as DownstreamError
from tributary.wire.binlog import MutationType

T = TableInfo.build("db", "t", [("id", "bigint")], ["id"])
INS = MutationType(MutationType.Insert)


def item(ts: int, fake: bool = False) -> PulledBinlogItem:
    return PulledBinlogItem(ts, ts if fake else ts - 1, b"", fake)


def rows_txn(i: PulledBinlogItem, n: int = 1) -> Txn:
    return Txn(i.commit_ts, i.start_ts, tuple(RowChange.insert(T, {"id": k}) for k in range(n)))


async def by_rows(i: PulledBinlogItem) -> Txn:
    return Txn(i.commit_ts, i.start_ts) if i.is_fake else rows_txn(i)


def make(
    sink: RecordingSink, convert=by_rows, **kw: object
) -> tuple[Syncer, asyncio.Queue[PulledBinlogItem], Checkpointer]:  # type: ignore[no-untyped-def]
    queue: asyncio.Queue[PulledBinlogItem] = asyncio.Queue(100)
    ckpt = Checkpointer(MemoryCheckpoint(), 0)
    return Syncer(queue, sink, ckpt, convert, **kw), queue, ckpt  # type: ignore[arg-type]


def test_compact_keeps_only_a_trailing_marker() -> None:
    m5, t7, m9, m12 = Txn(5, 5), rows_txn(item(7)), Txn(9, 9), Txn(12, 12)
    assert compact([m5, t7, m9, m12]) == [t7, m12]
    assert compact([m5, m9]) == [m9]
    assert compact([t7]) == [t7]


async def test_a_backlog_goes_in_few_batches_and_the_checkpoint_follows() -> None:
    sink = RecordingSink()
    sink.gate.clear()  # the sink is busy: everything queues up behind the first batch
    syncer, queue, ckpt = make(sink, batch_rows=4)
    for ts in range(1, 11):
        await queue.put(item(ts, fake=ts in (5, 10)))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(syncer.run())
        await asyncio.sleep(0.05)
        sink.gate.set()
        assert await syncer.drain(5)
        task.cancel()
    flat = [ts for b in sink.batches for ts in b]
    assert flat == sorted(flat) and 5 not in flat and flat[-1] == 10
    assert set(flat) >= {1, 2, 3, 4, 6, 7, 8, 9}
    assert len(sink.batches) <= 5 and all(len(b) <= 4 for b in sink.batches)
    assert ckpt.applied_ts == 10 and syncer.applied == 8 and syncer.fakes == 2
    assert syncer.rows == 8


async def test_retriable_errors_wait_and_others_stop_with_the_span() -> None:
    sink = RecordingSink()
    sink.failures = [DownstreamError("gone", retriable=True)]
    syncer, queue, ckpt = make(sink)
    await queue.put(item(3))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(syncer.run())
        assert await syncer.drain(10)
        task.cancel()
    assert sink.batches == [[3]] and ckpt.applied_ts == 3

    sink.failures = [DownstreamError("syntax", retriable=False)]
    await queue.put(item(4))
    with pytest.raises(ExceptionGroup) as err:
        await syncer.run()
    (e,) = err.value.exceptions
    assert isinstance(e, SinkError) and "commit ts 4..4" in str(e) and "syntax" in str(e)
    assert ckpt.applied_ts == 3 and sink.batches == [[3]]


async def test_a_pipelined_sink_gets_the_next_batch_before_the_acks_of_the_last() -> None:
    sink = PipelinedRecordingSink()
    sink.gate.clear()  # flush waits: only the acks that come with the next submit arrive
    syncer, queue, ckpt = make(sink, batch_rows=3)
    for ts in range(1, 11):
        await queue.put(item(ts, fake=ts == 10))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(syncer.run())
        await asyncio.wait_for(sink.flushing.wait(), 5)  # nothing left: it waits for the acks
        submitted = list(sink.submitted)
        assert len(submitted) >= 2
        assert ckpt.applied_ts == submitted[-2][-1]  # the acked batches, not the last one
        assert syncer.rows == sum(len(b) for b in submitted[:-1])
        sink.gate.set()
        assert await syncer.drain(5)
        task.cancel()
    assert [ts for b in sink.submitted for ts in b] == list(range(1, 11))
    assert ckpt.applied_ts == 10 and syncer.applied == 9 and syncer.fakes == 1
    assert sink.batches == []  # nothing applied again


async def test_a_failed_delivery_applies_every_unacknowledged_batch_again() -> None:
    sink = PipelinedRecordingSink()
    sink.gate.clear()
    sink.flush_failures = [DownstreamError("broker gone", retriable=True)]
    syncer, queue, ckpt = make(sink, batch_rows=2)
    for ts in range(1, 6):
        await queue.put(item(ts))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(syncer.run())
        await asyncio.wait_for(sink.flushing.wait(), 5)
        last = sink.submitted[-1]
        sink.gate.set()
        assert await syncer.drain(10)
        task.cancel()
    assert sink.batches == [last]  # the one batch not acknowledged, once
    assert ckpt.applied_ts == 5 and syncer.rows == 5


async def test_safe_mode_is_on_for_the_window_after_a_start() -> None:
    now = [0.0]
    sink = RecordingSink()
    syncer, queue, _ = make(sink, safe_mode_window=300, clock=lambda: now[0])
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(syncer.run())
        await queue.put(item(1))
        assert await syncer.drain(5)
        now[0] = 301
        await queue.put(item(2))
        assert await syncer.drain(5)
        task.cancel()
    assert sink.modes == [True, False]
    forced, queue, _ = make(RecordingSink(), safe_mode=True, safe_mode_window=0)
    assert forced.safe_mode


async def test_a_conversion_error_stops_right_below_the_bad_binlog() -> None:
    async def convert(i: PulledBinlogItem) -> Txn:
        if i.commit_ts == 3:
            raise UnknownTable("binlog at commit ts 3: table 77 is unknown")
        return rows_txn(i)

    sink = RecordingSink()
    syncer, queue, ckpt = make(sink, convert=convert)
    for ts in (1, 2, 3, 4):
        await queue.put(item(ts))
    with pytest.raises(ExceptionGroup) as err:
        await syncer.run()
    assert "commit ts 3" in str(err.value.exceptions[0])
    applied = [ts for b in sink.batches for ts in b]
    assert applied == [1, 2] and ckpt.applied_ts == 2  # what came before it went through


async def test_converter_skips_fakes_ignored_ts_and_filtered_tables() -> None:
    history = await history_with(create_db(1, 1), create_table(2, 2, T1))
    conv = Converter(history, TableFilter(ignore_dbs=["SHOP"]), ignore_commit_ts=[20])
    row = mutation(T1.id, (INS, insert(T1, {"id": 1, "a": 5})))
    assert await conv.convert(item(10, fake=True)) == Txn(10, 10)
    assert await conv.convert(dml(20, 2, row)) == Txn(20, 19)
    assert conv.ignored == 1
    filtered = await conv.convert(dml(30, 2, row))
    assert filtered == Txn(30, 29, schema_version=2)  # T1 lives in schema shop
    kept = await Converter(history).convert(dml(40, 2, row))
    assert len(kept.rows) == 1


async def test_converter_waits_for_a_ddl_job_then_gives_up() -> None:
    history = await history_with(create_db(1, 1))
    now = [0.0]
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s
        if len(slept) == 3:
            await history.put_job(create_table(2, 2, T1))

    conv = Converter(history, wait=60, clock=lambda: now[0], sleep=sleep)
    txn = await conv.convert(ddl(50, 2, "CREATE TABLE t1 (a int)"))
    assert txn.ddl is not None and len(slept) == 3
    with pytest.raises(DdlJobMissing, match="commit ts 60"):
        await conv.convert(ddl(60, 99))
    assert now[0] >= 60
