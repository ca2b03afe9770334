"""Causality keys and worker assignment (``sinks.mysql.causality``).

The property that matters: dispatching a stretch with ``Causality`` (flush on conflict) and
running each worker's queue in order, workers interleaved in any way, ends in the state of
the changes run one by one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.change import RowChange, RowKind, TableInfo
from tributary.sinks.mysql.causality import Causality, keys_of

T = TableInfo.build(
    "s", "t", [("id", "int"), ("u", "varchar(5)"), ("v", "int")], ["id"], {"uk": ["u"]}
)
UK_ONLY = TableInfo.build("s", "w", [("a", "int"), ("b", "int")], unique_keys={"ab": ["a", "b"]})
BARE = TableInfo.build("s", "log", [("k", "int"), ("v", "blob")])


def row(id_: int, u: str | None, v: int = 0) -> dict[str, Any]:
    return {"id": id_, "u": u, "v": v}


def test_keys_of_a_change() -> None:
    assert keys_of(RowChange.insert(T, row(1, "Ab "))) == ["s.t/PRIMARY=1", "s.t/uk=ab"]
    assert keys_of(RowChange.insert(T, row(1, None))) == ["s.t/PRIMARY=1"]  # NULL: no key
    upd = RowChange.update(T, row(1, "a"), row(2, "a"))
    assert keys_of(upd) == ["s.t/PRIMARY=2", "s.t/uk=a", "s.t/PRIMARY=1"]  # old and new
    assert keys_of(RowChange.insert(UK_ONLY, {"a": 1, "b": 2})) == ["s.w/ab=1,2"]


def test_rows_without_a_usable_key_hash_all_values() -> None:
    one = keys_of(RowChange.insert(BARE, {"k": 1, "v": b"\x00"}))
    assert len(one) == 1 and one[0].startswith("s.log/*=")
    assert keys_of(RowChange.delete(BARE, {"v": b"\x00", "k": 1})) == one  # same row
    assert keys_of(RowChange.insert(BARE, {"k": 1, "v": b"\x01"})) != one
    nulls = keys_of(RowChange.insert(UK_ONLY, {"a": 1, "b": None}))
    assert nulls[0].startswith("s.w/*=")


def test_the_worked_example() -> None:
    c = Causality(2)
    k1 = keys_of(RowChange.insert(T, row(1, "a")))
    w1 = c.assign(k1)
    assert w1 is not None
    assert c.assign(keys_of(RowChange.update(T, row(1, "a"), row(1, "c")))) == w1
    w2 = c.assign(["s.t/PRIMARY=2", "s.t/uk=b"])
    if w2 != w1:  # a key on each worker: a conflict
        assert c.assign(["s.t/PRIMARY=2", "s.t/uk=b", "s.t/uk=a"]) is None
        c.reset()
        assert len(c) == 0
    assert c.assign(["s.t/PRIMARY=2", "s.t/uk=b", "s.t/uk=a"]) is not None


def test_a_single_worker_never_conflicts() -> None:
    c = Causality(1)
    assert c.assign(["a"]) == 0 and c.assign(["b"]) == 0 and c.assign(["a", "b"]) == 0


ids = st.integers(0, 5)
us = st.none() | st.sampled_from(["a", "b", "c"])


@st.composite
def stretch(draw: st.DrawFn) -> list[RowChange]:
    """Changes an upstream with PRIMARY(id) and UNIQUE(u) accepted, from an empty table."""
    up: dict[int, dict[str, Any]] = {}
    out: list[RowChange] = []
    for _ in range(draw(st.integers(0, 30))):
        new = row(draw(ids), draw(us), draw(st.integers(0, 9)))
        old: int | None = None
        if len(up) > 0 and draw(st.booleans()):
            old = draw(st.sampled_from(sorted(up)))
        others = [r for k, r in up.items() if k != old]
        if new["u"] is not None and any(r["u"] == new["u"] for r in others):
            continue
        if old is None:
            if new["id"] in up:
                continue
            change = RowChange.insert(T, new)
        elif draw(st.booleans()):
            change = RowChange.delete(T, up.pop(old))
            out.append(change)
            continue
        else:
            if new["id"] != old and new["id"] in up:
                continue
            change = RowChange.update(T, up.pop(old), new)
        up[new["id"]] = new
        out.append(change)
    return out


def run(state: dict[Any, dict[str, Any]], change: RowChange) -> None:
    """Apply one change; a clash or a missing row means a reorder broke something."""
    if change.kind is not RowKind.INSERT:
        old = change.old_values if change.old_values is not None else change.values
        assert state.pop(old["id"], None) is not None, "changed a row that is not there"
    if change.kind is not RowKind.DELETE:
        v = change.values
        assert v["id"] not in state, "duplicate primary key"
        assert v["u"] is None or all(r["u"] != v["u"] for r in state.values()), "duplicate u"
        state[v["id"]] = dict(v)


@settings(max_examples=300, deadline=None)
@given(stretch(), st.integers(1, 4), st.data())
def test_dispatch_preserves_the_outcome(
    changes: list[RowChange], workers: int, data: st.DataObject
) -> None:
    expected: dict[Any, dict[str, Any]] = {}
    for c in changes:
        run(expected, c)
    state: dict[Any, dict[str, Any]] = {}
    causality = Causality(workers)
    queues: list[list[RowChange]] = [[] for _ in range(workers)]

    def flush() -> None:  # the workers' queues, interleaved as hypothesis likes
        while any(queues):
            q = data.draw(st.sampled_from([q for q in queues if q]))
            run(state, q.pop(0))

    for c in changes:
        w = causality.assign(keys_of(c))
        if w is None:
            flush()
            causality.reset()
            w = causality.assign(keys_of(c))
            assert w is not None
        queues[w].append(c)
    flush()
    assert state == expected
