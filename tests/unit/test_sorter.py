"""The P/C sorter: worked example, settle, and properties over random interleavings."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from services.pump.sorter import ItemKind, Sorter, SortItem


def P(start: int, pos: object = None) -> SortItem:
    return SortItem(ItemKind.PREWRITE, start, 0, pos)


def C(start: int, commit: int, pos: object = None) -> SortItem:
    return SortItem(ItemKind.COMMIT, start, commit, pos)


def R(start: int, pos: object = None) -> SortItem:
    return SortItem(ItemKind.ROLLBACK, start, 0, pos)


def F(ts: int, pos: object = None) -> SortItem:
    return SortItem(ItemKind.COMMIT, ts, ts, pos)


def test_worked_example_from_the_module_docstring() -> None:
    s = Sorter()
    assert not s.push(P(10, "a"))
    assert not s.push(P(12, "b"))
    assert not s.push(C(12, 15, "c"))
    assert s.max_commit_ts == 0 and s.blocking_prewrite() == 10 and s.queued == 3
    assert not s.push(F(16, "d"))
    assert s.push(C(10, 17, "e"))
    assert s.max_commit_ts == 17 and s.queued == 0 and s.handled == "e"
    assert not s.push(P(20, "f"))
    assert not s.all_matched()
    assert not s.push(R(20, "g"))
    assert (s.max_commit_ts, s.all_matched(), s.handled) == (17, True, "g")


def test_settle_unblocks_a_prewrite_that_never_got_a_commit() -> None:
    s = Sorter(max_commit_ts=5)
    s.push(P(10))
    s.push(P(11))
    s.push(C(11, 20))
    assert s.blocking_prewrite() == 10
    assert s.settle(10)
    assert s.max_commit_ts == 20 and s.all_matched() and s.blocking_prewrite() is None


def test_commit_at_or_below_the_max_does_not_move_it() -> None:
    s = Sorter(max_commit_ts=100)
    assert not s.push(C(1, 50))
    assert not s.push(F(100))
    assert s.max_commit_ts == 100
    assert s.push(F(101))


def test_commit_arriving_before_its_prewrite_leaves_the_prewrite_waiting() -> None:
    # As in tidb-binlog: a C-binlog cannot match a P-binlog that is stored later.
    s = Sorter()
    s.push(C(7, 9))
    s.push(P(7))
    assert s.blocking_prewrite() == 7 and s.max_commit_ts == 9


@dataclass
class Txn:
    start: int
    p_stored: bool = False
    commit: int | None = None  # allocated commit ts
    finished: bool = False  # its C- or rollback binlog is stored


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_tidb_like_histories_keep_the_max_below_every_pending_commit(data: st.DataObject) -> None:
    """TiDB takes a commit ts only after the P-binlog is stored; then no commit still to
    come for an already stored prewrite is ever at or below the max commit ts."""
    tso = itertools.count(1)
    sorter = Sorter()
    txns: list[Txn] = []
    highest = prev = 0

    def store_c(t: Txn) -> None:
        assert t.commit is not None
        sorter.push(C(t.start, t.commit))
        t.finished = True

    def rollback(t: Txn) -> None:
        sorter.push(R(t.start))
        t.finished = True

    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        begun = [t for t in txns if not t.p_stored]
        prepared = [t for t in txns if t.p_stored and t.commit is None and not t.finished]
        committing = [t for t in txns if t.commit is not None and not t.finished]
        actions = ["begin", "fake"]
        actions += ["store_p"] * bool(begun)
        actions += ["alloc_commit", "rollback"] * bool(prepared)
        actions += ["store_c"] * bool(committing)
        action = data.draw(st.sampled_from(actions), label="action")
        if action == "begin":
            txns.append(Txn(next(tso)))
        elif action == "fake":
            ts = next(tso)
            sorter.push(F(ts))
            highest = max(highest, ts)
        elif action == "store_p":
            t = data.draw(st.sampled_from(begun))
            sorter.push(P(t.start))
            t.p_stored = True
        elif action == "alloc_commit":
            data.draw(st.sampled_from(prepared)).commit = next(tso)
        elif action == "rollback":
            rollback(data.draw(st.sampled_from(prepared)))
        else:
            t = data.draw(st.sampled_from(committing))
            store_c(t)
            assert t.commit is not None
            highest = max(highest, t.commit)

        m = sorter.max_commit_ts
        assert m >= prev, "max commit ts went backwards"
        prev = m
        assert m <= highest
        for t in txns:
            if t.p_stored and not t.finished and t.commit is not None:
                assert m < t.commit, f"max {m} passed pending txn {t}"

    # Finish every transaction; then everything is matched and the max is the highest ts.
    for t in txns:
        if not t.p_stored:
            sorter.push(P(t.start))
            t.p_stored = True
        if not t.finished:
            if t.commit is None and data.draw(st.booleans(), label="rollback at end"):
                rollback(t)
                continue
            t.commit = t.commit or next(tso)
            store_c(t)
            highest = max(highest, t.commit)
    assert sorter.all_matched()
    assert sorter.queued == 0
    assert sorter.max_commit_ts == highest


_item = st.one_of(
    st.builds(lambda s: ("P", s, 0), st.integers(1, 12)),
    st.builds(lambda s, c: ("C", s, c), st.integers(1, 12), st.integers(1, 100)),
    st.builds(lambda s: ("R", s, 0), st.integers(1, 12)),
    st.builds(lambda t: ("F", t, t), st.integers(1, 100)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_item, max_size=40))
def test_any_arrival_order_matches_the_fifo_specification(raw: list[tuple[str, int, int]]) -> None:
    """Specification: after k arrivals the max is the largest commit ts among the non-P
    items that arrived before the first prewrite still unmatched at k (prewrite start_ts
    unique; matched = a C/R/F with its start_ts arrived after it)."""
    seen: set[int] = set()
    arrivals = []
    for kind, s, c in raw:
        if kind == "P":
            if s in seen:
                continue
            seen.add(s)
        arrivals.append((kind, s, c))

    sorter = Sorter()
    prev = 0
    for k, (kind, s, c) in enumerate(arrivals):
        item = {"P": P(s), "C": C(s, c), "R": R(s), "F": F(s)}[kind]
        sorter.push(item)

        def waiting(i: int, upto: int = k) -> bool:
            kind_i, s_i, _ = arrivals[i]
            return kind_i == "P" and not any(
                arrivals[j][0] != "P" and arrivals[j][1] == s_i for j in range(i + 1, upto + 1)
            )

        first = next((i for i in range(k + 1) if waiting(i)), k + 1)
        expected = max((cc for kk, _, cc in arrivals[:first] if kk != "P"), default=0)
        assert sorter.max_commit_ts == expected
        assert sorter.max_commit_ts >= prev
        prev = sorter.max_commit_ts
        assert sorter.all_matched() == (not any(waiting(i) for i in range(k + 1)))


@settings(max_examples=300, deadline=None)
@given(st.lists(_item, max_size=40), st.lists(st.integers(1, 8), max_size=10))
def test_push_many_is_pushing_one_by_one(raw: list[tuple[str, int, int]], cuts: list[int]) -> None:
    """Any arrival history (duplicate prewrites included) cut into batches at any points:
    the max, the waiting prewrites, the handled position and the queue are the same."""
    items = [
        {"P": P(s, i), "C": C(s, c, i), "R": R(s, i), "F": F(s, i)}[kind]
        for i, (kind, s, c) in enumerate(raw)
    ]
    one, many = Sorter(), Sorter()
    pos = 0
    for n in [*cuts, len(items)]:
        batch = items[pos : pos + n]
        moved = many.push_many(batch)
        before = one.max_commit_ts
        for item in batch:
            one.push(item)
        assert moved == (one.max_commit_ts != before)
        assert (many.max_commit_ts, many.waiting(), many.handled, many.queued) == (
            one.max_commit_ts,
            one.waiting(),
            one.handled,
            one.queued,
        )
        pos += n
