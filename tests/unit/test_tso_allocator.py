"""The TSO allocator: monotonic across restarts and clock steps, overflow, batching."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fakes import MemoryWindowStore
from tributary.tso.allocator import MAX_COUNT, TimestampAllocator
from tributary.tso.clock import ManualClock
from tributary.tso.errors import LogicalOverflow, NotLeader, TsoError
from tributary.wire.ts import MAX_LOGICAL, compose, logical, physical_ms

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (the in-memory store never waits)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("coroutine suspended")


def started(clock: ManualClock, store: MemoryWindowStore, **kw: int) -> TimestampAllocator:
    alloc = TimestampAllocator(clock, store, **kw)
    run(alloc.sync())
    return alloc


def test_first_term_starts_at_now_and_saves_window_before_serving() -> None:
    clock, store = ManualClock(50_000), MemoryWindowStore()
    alloc = TimestampAllocator(clock, store)
    with pytest.raises(TsoError) as err:
        alloc.allocate(1)
    assert err.value.retriable
    run(alloc.sync())
    assert store.saves == [53_000]
    assert alloc.allocate(1) == compose(50_000, 1)


def test_new_term_starts_above_saved_window_even_if_clock_is_behind() -> None:
    clock, store = ManualClock(9_000), MemoryWindowStore(saved=10_000)
    alloc = started(clock, store)
    assert physical_ms(alloc.allocate(1)) == 10_001
    assert store.saved == 13_001


def test_sync_rejected_by_store_does_not_serve() -> None:
    store = MemoryWindowStore()
    store.deposed = True
    alloc = TimestampAllocator(ManualClock(), store)
    with pytest.raises(NotLeader):
        run(alloc.sync())
    assert not alloc.ready
    with pytest.raises(TsoError):
        alloc.allocate(1)


def test_monotonic_across_simulated_restarts() -> None:
    clock, store = ManualClock(100_000), MemoryWindowStore()
    seen: list[int] = []
    for restart in range(6):
        alloc = started(clock, store)
        for _ in range(5):
            seen.append(alloc.allocate(3))
            clock.advance(40)
            run(alloc.tick())
        # the next process comes up with a clock far behind (or ahead) of this one
        clock.advance(-7_000 if restart % 2 == 0 else 2)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


def test_clock_going_backwards_never_moves_physical_back() -> None:
    clock, store = ManualClock(200_000), MemoryWindowStore()
    alloc = started(clock, store)
    clock.advance(500)
    run(alloc.tick())
    before = alloc.allocate(1)
    clock.advance(-10_000)
    for _ in range(20):
        run(alloc.tick())
        after = alloc.allocate(1)
        assert after > before
        before = after
    assert physical_ms(before) == 200_500


def test_ticks_follow_clock_and_extend_window_only_near_its_end() -> None:
    clock, store = ManualClock(10_000), MemoryWindowStore()
    alloc = started(clock, store)  # window 13_000
    clock.set(11_999)
    run(alloc.tick())
    assert store.saves == [13_000]
    assert alloc.physical_ms == 11_999
    clock.set(12_000)  # 1000 ms left: extend first
    run(alloc.tick())
    assert store.saves == [13_000, 15_000]
    assert alloc.physical_ms == 12_000


def test_clock_jump_past_window_saves_before_moving_physical() -> None:
    clock, store = ManualClock(10_000), MemoryWindowStore()
    alloc = started(clock, store)
    clock.set(60_000)
    store.deposed = True
    with pytest.raises(NotLeader):
        run(alloc.tick())
    assert alloc.physical_ms == 10_000  # never beyond the last saved window
    store.deposed = False
    run(alloc.tick())
    assert store.saved == 63_000 and alloc.physical_ms == 60_000


def test_logical_overflow_moves_into_next_ms_inside_window() -> None:
    clock, store = ManualClock(1_000), MemoryWindowStore()
    alloc = started(clock, store)
    first = alloc.allocate(MAX_COUNT)
    assert (physical_ms(first), logical(first)) == (1_000, MAX_LOGICAL - 1)
    nxt = alloc.allocate(2)
    assert (physical_ms(nxt), logical(nxt)) == (1_001, 2)


def test_logical_overflow_at_window_edge_waits_for_tick() -> None:
    clock, store = ManualClock(1_000), MemoryWindowStore()
    alloc = started(clock, store, save_interval_ms=4, extend_margin_ms=1)  # window 1004
    last = 0
    for _ in range(5):  # physical 1000..1004, each fully used
        ts = alloc.allocate(MAX_COUNT)
        assert ts > last
        last = ts
    assert physical_ms(last) == 1_004
    with pytest.raises(LogicalOverflow):
        alloc.allocate(1)
    clock.advance(10)
    run(alloc.tick())
    assert alloc.allocate(1) == compose(1_010, 1)


def test_tick_pushes_physical_when_clock_stalls_under_load() -> None:
    clock, store = ManualClock(5_000), MemoryWindowStore()
    alloc = started(clock, store)
    alloc.allocate(MAX_LOGICAL // 2 + 1)
    run(alloc.tick())  # clock did not move, but logical is past half
    assert alloc.allocate(1) == compose(5_001, 1)


@pytest.mark.parametrize("count", [1, 7, 1000, MAX_COUNT])
def test_batch_returns_last_of_consecutive_range(count: int) -> None:
    alloc = started(ManualClock(7_000), MemoryWindowStore())
    before = alloc.allocate(1)
    last = alloc.allocate(count)
    first = last - count + 1
    assert physical_ms(first) == physical_ms(last)
    assert logical(first) >= 1 and first > before


@pytest.mark.parametrize("count", [0, -1, MAX_COUNT + 1])
def test_bad_count_is_not_retriable(count: int) -> None:
    alloc = started(ManualClock(), MemoryWindowStore())
    with pytest.raises(TsoError) as err:
        alloc.allocate(count)
    assert not err.value.retriable


ops = st.lists(
    st.one_of(
        st.tuples(st.just("alloc"), st.integers(1, MAX_COUNT)),
        st.tuples(st.just("clock"), st.integers(-5_000, 5_000)),
        st.tuples(st.just("tick"), st.just(0)),
        st.tuples(st.just("restart"), st.integers(-5_000, 5_000)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_property_strictly_increasing_and_within_window(script: list[tuple[str, int]]) -> None:
    clock, store = ManualClock(1_000_000), MemoryWindowStore()
    alloc = started(clock, store, save_interval_ms=50, extend_margin_ms=10)
    last = 0
    for op, arg in script:
        if op == "alloc":
            try:
                ts = alloc.allocate(arg)
            except LogicalOverflow:
                continue
            assert ts - arg + 1 > last
            assert physical_ms(ts - arg + 1) == physical_ms(ts)
            last = ts
        elif op == "clock":
            clock.advance(arg)
        elif op == "tick":
            run(alloc.tick())
        else:
            clock.advance(arg)
            alloc = started(clock, store, save_interval_ms=50, extend_margin_ms=10)
        assert store.saved is not None and alloc.physical_ms <= store.saved
