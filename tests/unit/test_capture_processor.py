"""One processor against the fake upstream and downstream.

Proves: it applies from the status position; it stops at target-ts with the checkpoint there;
ignored start ts become checkpoint-only markers; a restart from an older status replays with
equal ts and the sink drops what it had (nothing applied twice); a source failure is reported.
"""

from __future__ import annotations

import asyncio

from services.capture.processor import Processor, ProcessorOptions
from services.capture.source import SourceFailure
from tests.support.capture_fakes import FakeDownstream, FakeLog
from tributary.cdc.keys import FeedId
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus, ReplicaConfig

FEED = FeedId("default", "cf-1")


def _processor(
    log: FakeLog, down: FakeDownstream, status: ChangeFeedStatus, **info: object
) -> Processor:
    cf = ChangeFeedInfo("default", "cf-1", "blackhole://", 1000, **info)  # type: ignore[arg-type]
    opts = ProcessorOptions(batch_txns=3, backoff_min=0.01, backoff_max=0.02)
    return Processor("default", "h:1", FEED, cf, status, log, down.open, opts)


async def test_target_ts_ignored_txns_and_replay() -> None:
    log, down = FakeLog(), FakeDownstream()
    await log.append(10)  # commit ts 1001..1010, start ts 1000..1009
    config = ReplicaConfig(ignore_txn_start_ts=(1002,))  # the txn committed at 1003
    p = _processor(log, down, ChangeFeedStatus(1002, "2"), target_ts=1008, config=config)
    async with asyncio.timeout(10):
        await p.run()
    assert p.finished and p.checkpoint_ts == 1008 and p.position == "8"
    assert down.applied == [1003, 1004, 1005, 1006, 1007, 1008]
    (rows,) = down.rows.values()
    assert sorted(rows) == [4, 5, 6, 7, 8]  # 3 was ignored
    assert log.opened == [("2", 1002)]

    await log.append(1)  # 1011: past the target, so the run can tell it is finished
    again = _processor(log, down, ChangeFeedStatus(1004, "4"), target_ts=1010)
    async with asyncio.timeout(10):
        await again.run()
    assert down.applied[6:] == [1009, 1010]  # 1005..1008 replayed and dropped by the sink


async def test_source_failure_is_reported_and_retried() -> None:
    log, down = FakeLog(), FakeDownstream()
    await log.append(2)
    log.fail_next_open = SourceFailure("connection lost", retriable=True)
    p = _processor(log, down, ChangeFeedStatus(1000, "0"), target_ts=1001)
    async with asyncio.timeout(10):
        await p.run()
    assert p.finished and down.applied == [1001]
    assert len(log.opened) == 2  # failed once, retried

    log.fail_next_open = SourceFailure("binlog_row_metadata is MINIMAL", retriable=False)
    q = _processor(log, down, ChangeFeedStatus(1000, "0"), target_ts=1002)
    async with asyncio.timeout(10):
        await q.run()
    assert not q.finished and q.error is not None and not q.error.retriable
    assert "MINIMAL" in q.error.message
