"""The merge: commit-ts order across sources, duplicates and disorder dropped, never backwards;
and the merge loop around it (inboxes in, one ordered queue out)."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.drainer.feed import MergeFeed
from services.drainer.item import PulledBinlogItem
from services.drainer.merge import Merger


@dataclass(frozen=True)
class It:
    commit_ts: int
    source: str = ""


def drain(m: Merger[It]) -> list[int]:
    out = []
    while (item := m.pop()) is not None:
        out.append(item.commit_ts)
    return out


def test_worked_example_from_the_module_docstring() -> None:
    m: Merger[It] = Merger(latest_ts=10)
    m.add_source("A", 10)
    m.add_source("B", 10)
    m.push("A", It(12))
    assert m.pop() is None  # B could still send 11
    m.push("B", It(15, "B"))
    assert m.pop() == It(12)
    assert m.pop() is None
    m.push("A", It(15, "A"))
    assert m.pop() == It(15, "B")  # tie: the item pushed first
    assert m.pop() is None
    m.push("B", It(20))
    assert m.pop() is None  # A:15 is a duplicate of the latest
    assert m.stats.duplicates == 1
    m.push("A", It(13))
    assert m.pop() is None
    assert m.stats.disorder == 1
    assert m.remove_source("A")
    assert m.pop() == It(20)
    assert m.latest_ts == 20
    assert m.stats.emitted == 3


def test_waits_for_every_source_and_reports_who_it_waits_for() -> None:
    m: Merger[It] = Merger()
    m.add_source("A", 0)
    m.add_source("B", 0)
    m.add_source("C", 0)
    m.push("A", It(1))
    m.push("C", It(2))
    assert m.pop() is None
    assert m.waiting_for() == ["B"]
    assert m.wanted() == ["B"]
    m.push("B", It(9))
    assert drain(m) == [1]  # then A has nothing pending
    assert m.wanted() == ["A"]


def test_a_paused_source_is_still_waited_for_but_not_wanted() -> None:
    m: Merger[It] = Merger()
    m.add_source("A", 0)
    m.add_source("B", 0)
    m.push("A", It(5))
    m.pause("B")
    assert m.wanted() == []
    assert m.waiting_for() == ["B"]
    assert m.pop() is None  # B may still hold something below 5
    m.resume("B")
    assert m.wanted() == ["B"]
    m.push("B", It(3))
    assert drain(m) == [3]
    assert m.sources()["B"].position == 3


def test_a_removed_source_s_delivered_item_is_still_emitted_in_order() -> None:
    m: Merger[It] = Merger()
    m.add_source("A", 0)
    m.add_source("B", 0)
    m.push("A", It(7))
    m.remove_source("A")
    assert m.pop() is None  # B is still waited for
    m.push("B", It(4))
    assert drain(m) == [4]
    m.push("B", It(8))
    assert drain(m) == [7, 8]  # A's leftover comes first
    assert m.sources().keys() == {"B"}


def test_a_source_added_while_running_blocks_until_it_delivers() -> None:
    m: Merger[It] = Merger()
    m.add_source("A", 0)
    m.push("A", It(3))
    assert drain(m) == [3]
    m.add_source("B", m.latest_ts)
    m.push("A", It(6))
    assert m.pop() is None
    m.push("B", It(4))
    assert drain(m) == [4]
    # the same id may come back after it was removed
    m.remove_source("B")
    m.add_source("B", m.latest_ts)
    m.push("B", It(5))
    assert drain(m) == [5]


def test_misuse_is_refused() -> None:
    m: Merger[It] = Merger()
    m.add_source("A", 0)
    with pytest.raises(ValueError, match="already merged"):
        m.add_source("A", 0)
    m.push("A", It(1))
    with pytest.raises(ValueError, match="pending"):
        m.push("A", It(2))
    with pytest.raises(KeyError):
        m.push("Z", It(2))
    assert not m.remove_source("Z")


def test_no_source_nothing_to_emit() -> None:
    m: Merger[It] = Merger(latest_ts=5)
    assert m.pop() is None
    assert m.latest_ts == 5


@st.composite
def streams_and_schedule(draw: st.DrawFn) -> tuple[dict[str, list[int]], list[int], list[int]]:
    n = draw(st.integers(1, 5))
    streams = {f"s{i}": sorted(draw(st.sets(st.integers(1, 60), max_size=25))) for i in range(n)}
    choices = draw(st.lists(st.integers(0, 1000), min_size=200, max_size=200))
    pauses = draw(st.lists(st.integers(0, 1000), max_size=40))
    return streams, choices, pauses


@settings(max_examples=300, deadline=None)
@given(streams_and_schedule())
def test_any_interleaving_emits_every_distinct_ts_once_in_order(
    case: tuple[dict[str, list[int]], list[int], list[int]],
) -> None:
    streams, choices, pauses = case
    m: Merger[It] = Merger()
    rest = {sid: list(items) for sid, items in streams.items()}
    for sid in rest:
        m.add_source(sid, 0)
    out: list[int] = []
    ids = sorted(rest)
    for step, pick in enumerate(choices):
        if step < len(pauses):  # flip a source between paused and running
            sid = ids[pauses[step] % len(ids)]
            (m.resume if m.sources()[sid].paused else m.pause)(sid)
        ready = [sid for sid in m.wanted() if rest[sid]]
        if ready:
            sid = ready[pick % len(ready)]
            m.push(sid, It(rest[sid].pop(0), sid))
        out += drain(m)
    for sid in ids:  # let everything through: resume, feed, then retire exhausted sources
        m.resume(sid)
    while any(rest.values()):
        for sid in m.wanted():
            if rest[sid]:
                m.push(sid, It(rest[sid].pop(0), sid))
        out += drain(m)
        for sid in m.wanted():
            if not rest[sid]:
                m.remove_source(sid)
        out += drain(m)
    for sid in list(m.sources()):
        m.remove_source(sid)
    out += drain(m)

    assert all(a < b for a, b in itertools.pairwise(out))
    everything = [ts for items in streams.values() for ts in items]
    assert sorted(set(everything)) == out
    assert m.stats.duplicates == len(everything) - len(out)
    assert m.stats.disorder == 0


# -- the merge loop ------------------------------------------------------------------


def item(ts: int) -> PulledBinlogItem:
    return PulledBinlogItem(ts, ts - 1, b"x%d" % ts, False)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_feed_merges_inboxes_and_an_idle_source_holds_it_back() -> None:
    out: asyncio.Queue[PulledBinlogItem] = asyncio.Queue(100)
    feed = MergeFeed(Merger(0), out, inbox_size=4)
    a = feed.add_source("A", 0)
    b = feed.add_source("B", 0)
    loop = asyncio.create_task(feed.run(), name="test-merge")
    try:
        for ts in (2, 4, 6):
            await a.put(item(ts))
        await settle()
        assert out.empty()  # B said nothing yet: it could still send 1
        await b.put(item(3))
        await settle()
        assert [out.get_nowait().commit_ts for _ in range(out.qsize())] == [2, 3]
        await b.put(item(7))  # a fake binlog from an idle pump moves the merge on
        await settle()
        assert [out.get_nowait().commit_ts for _ in range(out.qsize())] == [4, 6]
        feed.pause("B")
        await b.put(item(8))
        await a.put(item(9))
        await settle()
        assert [out.get_nowait().commit_ts for _ in range(out.qsize())] == [7]  # B's 8 unread
        feed.resume("B")
        await settle()
        assert [out.get_nowait().commit_ts for _ in range(out.qsize())] == [8]
        feed.remove_source("B")
        await settle()
        assert [out.get_nowait().commit_ts for _ in range(out.qsize())] == [9]
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_feed_backpressure_bounded_inbox() -> None:
    out: asyncio.Queue[PulledBinlogItem] = asyncio.Queue(1)
    feed = MergeFeed(Merger(0), out, inbox_size=2)
    a = feed.add_source("A", 0)
    loop = asyncio.create_task(feed.run(), name="test-merge")

    async def produce() -> None:
        for ts in range(1, 11):
            await a.put(item(ts))

    producer = asyncio.create_task(produce(), name="test-producer")
    try:
        await settle()
        assert not producer.done()  # 1 in out, 1 pending in the merger, 2 in the inbox
        got = [(await out.get()).commit_ts for _ in range(10)]
        await producer
        assert got == list(range(1, 11))
    finally:
        loop.cancel()
        producer.cancel()
        await asyncio.gather(loop, producer, return_exceptions=True)


def test_a_transaction_wins_a_tie_with_a_fake_binlog() -> None:
    # A standalone tidb-server commits on its own oracle, the pumps' fake binlogs come from
    # our TSO: both read the machine's clock and met on timestamps like this one (a physical
    # ms, logical 1) in tests/integration/test_tidb_server.py, where the fake pushed first
    # used to win and the transaction was dropped as a duplicate.
    ts = 470790025956294657
    fake = PulledBinlogItem(ts, ts, b"", True)
    txn = PulledBinlogItem(ts, ts - (3 << 18), b"", False)
    for order in ([("p1", fake), ("p2", txn)], [("p2", txn), ("p1", fake)]):
        m: Merger[PulledBinlogItem] = Merger(latest_ts=ts - 1)
        m.add_source("p1", ts - 1)
        m.add_source("p2", ts - 1)
        for source, item in order:
            m.push(source, item)
        assert m.pop() is txn
        m.push("p2", PulledBinlogItem(ts + 9, ts + 9, b"", True))
        assert m.pop() is None  # the fake at ts is dropped; p1 has nothing pending now
        assert (m.stats.emitted, m.stats.duplicates, m.stats.disorder) == (1, 0, 0)
