"""Sync points' pure parts: the settings as TiCDC takes and checks them, and their schedule.

Proves: TiCDC's keys are accepted at the top level of a changefeed config (Go duration text or
nanoseconds, dashed or underscored), with TiCDC's defaults (off, 10m, 24h) and TiCDC's minimums
(30 s, 1 h) enforced only when sync points are on; a record read back keeps what it says; the
points fall on whole multiples of the interval since the epoch (logical 0), the first one at or
after the checkpoint, and a gap makes every point in it due, up to a cap. Processors over the
fake upstream and downstream: a whole changefeed writes each point with exactly the
transactions up to it applied (points of a gap in one write, the points up to target-ts before
it ends); a spread one, over two processors (one holding ``#ddl``), writes each point only once
both have applied everything up to it and nothing after; a restart at a point writes it again.
Sync points are refused for a sink without a sync point table.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from services.capture.errors import BadRequest
from services.capture.feeds import check_sync_points
from services.capture.processor import Processor, ProcessorOptions
from services.capture.spanbook import SpanMark
from tests.support.capture_fakes import OTHER, TABLE, FakeDownstream, FakeLog
from tributary.cdc.errors import BadRecord
from tributary.cdc.keys import FeedId
from tributary.cdc.model import ChangeFeedInfo, ChangeFeedStatus
from tributary.cdc.replica import ReplicaConfig
from tributary.cdc.spans import DDL_SPAN
from tributary.cdc.syncpoint import (
    MAX_POINTS_AT_ONCE,
    Schedule,
    go_duration,
    parse_duration_ns,
)
from tributary.change import RowChange, Txn
from tributary.sinks import WriteGate
from tributary.sinks.syncpoints import SyncPointOptions
from tributary.wire.ts import compose

S = 1_000_000_000


def test_durations_read_as_go_parses_them() -> None:
    assert parse_duration_ns("10m", "x") == 600 * S
    assert parse_duration_ns("1h30m", "x") == 5400 * S
    assert parse_duration_ns("1.5s", "x") == 1_500_000_000
    assert parse_duration_ns("300ms", "x") == 300_000_000
    assert parse_duration_ns(30_000_000_000, "x") == 30 * S  # TiCDC's JSON: nanoseconds
    for bad in ("10", "10 m", "1d", "", "m", True, 1.5, "-5s", 0, "0"):
        with pytest.raises(BadRecord, match=r"^x must be"):
            parse_duration_ns(bad, "x")
    assert [go_duration(n) for n in (600 * S, 5400 * S, 30 * S, 1)] == [
        "10m0s",
        "1h30m0s",
        "30s",
        "1ns",
    ]


def test_ticdc_defaults_and_the_keys_at_the_top_level() -> None:
    off = ReplicaConfig.from_dict({}, strict=True)
    assert (off.enable_sync_point, off.sync_point_interval, off.sync_point_retention) == (
        False,
        600 * S,
        86400 * S,
    )
    on = ReplicaConfig.from_dict(
        {"enable-sync-point": True, "sync-point-interval": "30s", "sync-point-retention": "1h"},
        strict=True,
    )
    assert (on.enable_sync_point, on.sync_point_interval, on.sync_point_retention) == (
        True,
        30 * S,
        3600 * S,
    )
    api = ReplicaConfig.from_dict(  # the v2 API's JSON: underscored keys, nanoseconds
        {"enable_sync_point": True, "sync_point_interval": 30 * S, "sync_point_retention": "1h"},
        strict=True,
    )
    assert api == on
    assert ReplicaConfig.from_dict(on.to_dict(), strict=True) == on
    assert on.to_dict()["sync-point-interval"] == 30_000_000_000  # as TiCDC's records
    info = ChangeFeedInfo("default", "cf", "mysql://h/", 1, config=on)
    assert ChangeFeedInfo.from_json(info.to_json()).config == on


def test_ticdc_minimums_apply_when_sync_points_are_on() -> None:
    with pytest.raises(BadRecord, match=r"sync-point-interval 10s must be at least 30s"):
        ReplicaConfig.from_dict(
            {"enable-sync-point": True, "sync-point-interval": "10s"}, strict=True
        )
    with pytest.raises(BadRecord, match=r"sync-point-retention 30m0s must be at least 1h0m0s"):
        ReplicaConfig.from_dict(
            {"enable-sync-point": True, "sync-point-retention": "30m"}, strict=True
        )
    with pytest.raises(BadRecord, match=r"config\.sync-point-interval must be a duration"):
        ReplicaConfig.from_dict({"sync-point-interval": "soon"}, strict=True)
    with pytest.raises(BadRecord, match="enable-sync-point must be true or false"):
        ReplicaConfig.from_dict({"enable-sync-point": "yes"}, strict=True)
    # off: TiCDC checks nothing (the values are kept for when they are turned on)
    off = ReplicaConfig.from_dict({"sync-point-interval": "10s"}, strict=True)
    assert off.sync_point_interval == 10 * S and not off.enable_sync_point
    # a record read back keeps what it says, and a value that is no duration is the default
    raw = {"enable-sync-point": True, "sync-point-interval": 5 * S, "sync-point-retention": "?"}
    kept = ReplicaConfig.from_dict(raw)
    assert (kept.sync_point_interval, kept.sync_point_retention) == (5 * S, 86400 * S)


def ts(seconds: float, logical: int = 0) -> int:
    return compose(round(seconds * 1000), logical)


def test_points_fall_on_multiples_of_the_interval_since_the_epoch() -> None:
    every30 = Schedule.every(30 * S)
    assert every30.interval_ms == 30_000 and every30.step == 30_000 << 18
    base = 1_700_000_010  # a whole multiple of 30 s plus 0
    assert base % 30 == 0
    assert every30.first_at_or_after(ts(base)) == ts(base)  # a point itself
    assert every30.first_at_or_after(ts(base, 1)) == ts(base + 30)  # a logical past it
    assert every30.first_at_or_after(ts(base + 0.001)) == ts(base + 30)
    assert every30.first_at_or_after(ts(base - 29.999)) == ts(base)
    odd = Schedule.every(7 * S + 500_000_000)  # 7.5 s
    assert odd.first_at_or_after(ts(base + 1)) == ts(base + 7.5)  # base is one of its points


def test_due_points_lie_before_the_item_that_passes_them() -> None:
    every30 = Schedule.every(30 * S)
    first = ts(1_700_000_010)
    assert every30.due(first, first) == ()  # an item at the point itself is before it
    assert every30.due(first, first + 1) == (first,)
    assert every30.due(first, ts(1_700_000_039)) == (first,)
    gap = every30.due(first, ts(1_700_000_100))  # an idle stretch over three points
    assert gap == (first, ts(1_700_000_040), ts(1_700_000_070))
    huge = every30.due(first, first + (MAX_POINTS_AT_ONCE + 5) * every30.step)
    assert len(huge) == MAX_POINTS_AT_ONCE
    assert huge[0] == first + 5 * every30.step  # the newest ones


BASE = 1_700_000_010  # seconds: a whole multiple of 30
FEED = FeedId("default", "cf-1")
SYNC = ReplicaConfig(
    enable_sync_point=True, sync_point_interval=30 * S, sync_point_retention=3600 * S
)


def at(second: float, logical: int = 0) -> int:
    return ts(BASE + second, logical)


def txn(commit_ts: int) -> Txn:
    """Rows in both tables (shop.t and test.x), keyed by the commit ts."""
    rows = (
        RowChange.insert(TABLE, {"id": commit_ts, "v": "v"}),
        RowChange.insert(OTHER, {"id": commit_ts}),
    )
    return Txn(commit_ts, commit_ts - 1, rows)


@dataclass
class FakeStore:
    """Records each write: its points and what the downstream had applied at that moment."""

    down: FakeDownstream
    writes: list[tuple[tuple[int, ...], list[int]]] = field(default_factory=list)
    options: list[SyncPointOptions] = field(default_factory=list)
    write_gate: WriteGate | None = None

    async def write(self, points: Sequence[int]) -> None:
        self.writes.append((tuple(points), sorted(self.down.applied)))

    async def close(self) -> None:
        pass

    @asynccontextmanager
    async def open(self, url: str, options: SyncPointOptions) -> AsyncIterator[FakeStore]:
        self.options.append(options)
        yield self


def processor(
    log: FakeLog,
    down: FakeDownstream,
    store: FakeStore,
    start: int,
    target: int,
    spans: Mapping[str, SpanMark] | None = None,
) -> Processor:
    info = ChangeFeedInfo("default", "cf-1", "mysql://h/", start, target_ts=target, config=SYNC)
    return Processor(
        "default",
        "h:1",
        FEED,
        info,
        ChangeFeedStatus(start, "0"),
        log,
        down.open,
        ProcessorOptions(batch_txns=100, backoff_min=0.01, backoff_max=0.02),
        spans=spans,
        tables=frozenset({"shop.t", "test.x"}) if spans else frozenset(),
        sync_points=store.open,
    )


STAMPS = [at(1), at(2), at(29), at(30), at(30, 1), at(31), at(95), at(100), at(130)]


async def test_a_whole_changefeed_writes_each_point_at_its_barrier() -> None:
    log, down = FakeLog(), FakeDownstream()
    store = FakeStore(down)
    await log.append_txns(*(txn(t) for t in STAMPS))
    p = processor(log, down, store, start=at(0.5), target=at(121))
    async with asyncio.timeout(10):
        await p.run()
    assert p.finished and p.error is None
    assert store.options == [SyncPointOptions("default", "cf-1", 3600.0)]
    assert (
        store.writes
        == [
            ((at(30),), STAMPS[:4]),  # the point's own ts is before it, its next logical after
            ((at(60), at(90)), STAMPS[:6]),  # an idle stretch: two points at once
            ((at(120),), STAMPS[:8]),  # the last one before target-ts, written before the end
        ]
    )
    assert down.applied == STAMPS[:8]


async def test_a_restart_at_a_point_writes_it_again() -> None:
    log, down = FakeLog(), FakeDownstream()
    store = FakeStore(down)
    await log.append_txns(*(txn(t) for t in STAMPS))
    p = processor(log, down, store, start=at(30), target=at(50))  # checkpoint on the point
    async with asyncio.timeout(10):
        await p.run()
    assert [w[0] for w in store.writes] == [(at(30),)]


async def observe(procs: Sequence[Processor]) -> None:
    """The manager and etcd, without delay: every span's checkpoint to every processor."""
    while True:
        marks = {s: m.checkpoint_ts for p in procs for s, m in p.book.marks.items()}
        for p in procs:
            p.observe(marks)
        await asyncio.sleep(0.005)


async def test_a_spread_changefeed_writes_a_point_once_every_span_is_at_it() -> None:
    log, down = FakeLog(), FakeDownstream()
    store = FakeStore(down)
    start = at(0.5)
    mark = SpanMark(start, "0")
    holder = processor(log, down, store, start, at(121), {DDL_SPAN: mark, "shop.t": mark})
    other = processor(log, down, store, start, at(121), {"test.x": mark})
    await log.append_txns(*(txn(t) for t in STAMPS))
    async with asyncio.timeout(10), asyncio.TaskGroup() as tg:
        etcd = tg.create_task(observe([holder, other]))
        runs = [tg.create_task(p.run()) for p in (other, holder)]
        await asyncio.gather(*runs)
        etcd.cancel()
    assert holder.finished and other.finished
    assert len(store.options) == 1  # only the #ddl holder opens the store
    twice = sorted(STAMPS * 2)  # each transaction's rows, applied by both processors
    assert store.writes == [
        ((at(30),), twice[:8]),
        ((at(60), at(90)), twice[:12]),
        ((at(120),), twice[:16]),
    ]


async def test_the_ddl_holder_writes_only_once_the_other_span_is_at_the_point() -> None:
    log, down = FakeLog(), FakeDownstream()
    store = FakeStore(down)
    start = at(0.5)
    mark = SpanMark(start, "0")
    holder = processor(log, down, store, start, at(50), {DDL_SPAN: mark, "shop.t": mark})
    await log.append_txns(*(txn(t) for t in STAMPS))
    run = asyncio.create_task(holder.run())
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert store.writes == []  # nothing seen from etcd yet
    holder.observe({DDL_SPAN: at(30), "shop.t": at(30), "test.x": at(29)})
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert store.writes == []  # test.x, elsewhere, is not at the point yet
    assert holder.checkpoint_ts == at(30)  # held at it, nothing after it applied
    holder.observe({DDL_SPAN: at(30), "shop.t": at(30), "test.x": at(30)})
    async with asyncio.timeout(10):
        await run
    assert [w[0] for w in store.writes] == [(at(30),)]


def test_sync_points_need_a_sql_sink() -> None:
    check_sync_points("mysql://root@h:3306/", SYNC)
    check_sync_points("tidb://root@h:4000/", SYNC)
    check_sync_points("kafka://k:9092/t?protocol=canal-json", ReplicaConfig())
    with pytest.raises(BadRequest, match=r"enable-sync-point: .* not into 'kafka://k:9092/t"):
        check_sync_points("kafka://k:9092/t?protocol=canal-json", SYNC)
