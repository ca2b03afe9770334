"""The capture's lease fence, with a fake clock, and what the processor and its manager do with it.

Proves: the fence is down before a lease and after ``lose``; it is up from a grant until
``margin`` before the deadline counted from each answered keepalive's *send* time, and an
older keepalive answered late never moves it back; ``check`` refuses with ``WriteRefused``;
a healthy lease (keepalives answered on time) never lets it fall. A processor whose gate
refuses applies nothing and reports no error, and applies once the gate lets writes through;
the manager starts nothing while the fence is down and ``halt`` cancels what runs. The DDL
holder of a spread changefeed applies a DDL only once etcd has its own ``#ddl`` checkpoint at
``ts - 1`` (where a capture taking ``#ddl`` over resumes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from services.capture.fence import LeaseFence, fence_margin, keepalive_interval
from services.capture.manager import ProcessorManager
from services.capture.processor import Processor, ProcessorOptions
from services.capture.spanbook import SpanMark
from services.capture.state import ClusterState, FeedView, Mirror
from tests.support.capture_fakes import FakeDownstream, FakeLog
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import CaptureInfo, ChangeFeedInfo, ChangeFeedStatus, TaskPosition
from tributary.cdc.spans import DDL_SPAN, WHOLE_SPAN, TableAssign, TableProgress
from tributary.change import Ddl, Txn
from tributary.coord.kv import WatchEvent, WatchEventKind
from tributary.sinks import WriteGate, WriteRefused

FEED = FeedId("default", "cf-1")
KEYS = Keys("default")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_fence_follows_the_send_time_of_answered_keepalives() -> None:
    clock = Clock()
    fence = LeaseFence(3, 1, monotonic=clock)
    assert not fence.is_open()  # no lease yet
    with pytest.raises(WriteRefused):
        fence.check()
    fence.grant(100.0)  # deadline 103, falls at 102
    clock.now = 101.9
    assert fence.is_open()
    fence.check()
    clock.now = 102.0
    assert not fence.is_open()
    with pytest.raises(WriteRefused, match=r"fence margin 1\.00 s"):
        fence.check()
    fence.renewed(101.5)  # a keepalive sent at 101.5, answered now: deadline 104.5
    assert fence.is_open() and fence.deadline == 104.5
    fence.renewed(101.0)  # an older one answered late moves nothing back
    assert fence.deadline == 104.5
    fence.lose()
    assert not fence.is_open()
    fence.renewed(102.0)  # an answered keepalive proves the lease lived: nothing moved away
    assert fence.is_open()
    fence.lose()
    fence.grant(102.5)
    assert fence.is_open() and fence.deadline == 105.5


def test_a_healthy_lease_never_lets_the_fence_fall() -> None:
    clock = Clock()
    ttl = 3
    fence = LeaseFence(ttl, monotonic=clock)
    assert fence.margin == fence_margin(ttl) == 1.0
    fence.grant(clock.now)
    for _ in range(100):  # keepalives every interval, each answered within 0.2 s
        clock.now += keepalive_interval(ttl) + 0.2
        assert fence.is_open()
        fence.renewed(clock.now - 0.2)
    with pytest.raises(ValueError, match="margin"):
        LeaseFence(3, 3)


async def test_wait_open_and_wait_fallen() -> None:
    fence = LeaseFence(60, 1)
    opened = asyncio.create_task(fence.wait_open())
    await asyncio.sleep(0)
    assert not opened.done()
    fence.grant(asyncio.get_running_loop().time())
    async with asyncio.timeout(5):
        await opened
    fallen = asyncio.create_task(fence.wait_fallen())
    await asyncio.sleep(0)
    assert not fallen.done()
    fence.lose()
    async with asyncio.timeout(5):
        await fallen


def _processor(
    log: FakeLog,
    down: FakeDownstream,
    gate: WriteGate | None,
    spans: Mapping[str, SpanMark] | None = None,
) -> Processor:
    cf = ChangeFeedInfo("default", "cf-1", "blackhole://", 1000, target_ts=1003)
    opts = ProcessorOptions(batch_txns=3, backoff_min=0.01, backoff_max=0.02)
    return Processor(
        "default",
        "h:1",
        FEED,
        cf,
        ChangeFeedStatus(1000, "0"),
        log,
        down.open,
        opts,
        spans=spans,
        tables=frozenset({"shop.t"}) if spans else frozenset(),
        gate=gate,
    )


async def test_a_fenced_processor_writes_nothing_and_reports_no_error() -> None:
    log, down = FakeLog(), FakeDownstream()
    await log.append(4)
    fence = LeaseFence(60, 1)
    p = _processor(log, down, fence.check)
    run = asyncio.create_task(p.run())
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert down.applied == [] and p.error is None and not run.done()
    fence.grant(asyncio.get_running_loop().time())
    async with asyncio.timeout(10):
        await run
    assert p.finished and down.applied == [1001, 1002, 1003]


async def test_the_ddl_holder_waits_for_its_own_hold_mark_in_etcd() -> None:
    log, down = FakeLog(), FakeDownstream()
    await log.append(1)  # 1001: a row
    async with log._grew:  # 1002: a DDL, then 1003, 1004: rows
        log.txns.append(Txn(1002, 1001, ddl=Ddl("shop", "ALTER TABLE t ADD c INT", "t")))
    await log.append(2)
    p = _processor(log, down, None, {DDL_SPAN: SpanMark(1000, "0"), "shop.t": SpanMark(1000, "0")})
    p.observe({DDL_SPAN: 1000, "shop.t": 1000})
    run = asyncio.create_task(p.run())
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert down.applied == [1001]  # every span here at 1001: the DDL waits for etcd
    p.observe({DDL_SPAN: 1000, "shop.t": 1001})
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert down.applied == [1001]
    p.observe({DDL_SPAN: 1001, "shop.t": 1001})  # #ddl's own hold mark is in etcd
    async with asyncio.timeout(10):
        await run
    assert down.applied == [1001, 1002, 1003]


def _state(capture: str) -> ClusterState:
    entries = {
        KEYS.capture_key(capture): CaptureInfo(capture, "h:1").to_json(),
        KEYS.info_key(FEED): ChangeFeedInfo("default", "cf-1", "blackhole://", 1).to_json(),
        KEYS.status_key(FEED): ChangeFeedStatus(1000, "0").to_json(),
        KEYS.task_key(capture, FEED): TaskPosition().to_json(),
        KEYS.table_key(FEED, WHOLE_SPAN): TableAssign(capture).to_json(),
        KEYS.progress_key(FEED, WHOLE_SPAN): TableProgress(1000, "0", capture).to_json(),
    }
    m = Mirror()
    for i, (k, v) in enumerate(entries.items(), start=2):
        m.apply(WatchEvent(WatchEventKind.PUT, k, v, i))
    return ClusterState.parse(KEYS, m)


async def test_the_manager_runs_nothing_while_fenced_and_halt_cancels() -> None:
    log, down = FakeLog(), FakeDownstream()
    clock = Clock()
    fence = LeaseFence(3, 1, monotonic=clock)

    def make(view: FeedView, spans: Mapping[str, SpanMark]) -> Processor:
        assert view.info is not None and view.status is not None
        return Processor(
            "default", "h:1", view.feed, view.info, view.status, log, down.open, spans=spans
        )

    async with asyncio.TaskGroup() as tg:
        manager = ProcessorManager(KEYS, "c1", make, tg, monotonic=clock, fence=fence)
        state = _state("c1")
        manager.tick(state)
        assert manager.running == {}  # fence down: nothing starts
        fence.grant(clock.now)
        manager.tick(state)
        assert set(manager.running) == {FEED}
        run = manager.running[FEED]
        clock.now += 2.5  # past deadline - margin
        assert not fence.is_open()
        manager.halt()
        assert manager.running == {}
        await asyncio.gather(run.task, return_exceptions=True)
        assert run.task.cancelled()
        manager.tick(state)
        assert manager.running == {}  # still fenced: not started again
        await manager.close()
