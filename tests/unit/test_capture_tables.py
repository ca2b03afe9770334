"""Table scheduling's pure parts: a processor's span book, and the owner's scheduler.

Proves: a span behind the others takes only what follows its own checkpoint, a DDL goes to
``#ddl`` alone and rows of unscheduled tables too; the barrier's resume point is ``ts - 1``;
the owner spreads spans evenly, moves one at a time to a joining capture (stop, then assign
once released), empties a draining capture, reassigns a dead capture's spans at once, keeps a
task position on each holder only, and makes the status checkpoint the minimum of the spans'.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from services.capture.schedule import Scheduler
from services.capture.spanbook import SpanBook, SpanMark
from services.capture.state import ClusterState, Mirror
from services.capture.worker import PatchGroup
from tests.support.capture_fakes import OTHER, TABLE
from tributary.cdc.keys import FeedId, Keys
from tributary.cdc.model import CaptureInfo, ChangeFeedInfo, ChangeFeedStatus
from tributary.cdc.spans import DDL_SPAN, SpanState, TableAssign, TableProgress
from tributary.change import Ddl, RowChange, Txn
from tributary.coord.kv import WatchEvent, WatchEventKind

KEYS = Keys("default")
FEED = FeedId("default", "cf-1")
T, X = "shop.t", "test.x"


def _txn(ts: int, *tables: str) -> Txn:
    rows = tuple(
        RowChange.insert(TABLE, {"id": ts, "v": "a"})
        if t == T
        else RowChange.insert(OTHER, {"id": ts})
        for t in tables
    )
    return Txn(ts, ts - 1, rows)


def test_a_span_behind_takes_only_what_follows_its_checkpoint() -> None:
    book = SpanBook({T: SpanMark(100, "p100"), X: SpanMark(300, "p300")}, frozenset({T, X}))
    assert book.low() == SpanMark(100, "p100")
    kept = book.keep(_txn(200, T, X))
    assert [r.table.table for r in kept.rows] == ["t"]
    book.advance(200, "p200")
    assert book.marks == {T: SpanMark(200, "p200"), X: SpanMark(300, "p300")}
    assert len(book.keep(_txn(400, T, X)).rows) == 2


def test_ddl_and_unscheduled_tables_belong_to_the_ddl_span() -> None:
    ddl = Txn(500, 499, ddl=Ddl("shop", "ALTER TABLE t ADD c INT", "t"))
    tables_only = SpanBook({T: SpanMark(1, "p")}, frozenset({T}))
    assert tables_only.keep(ddl).ddl is None  # a checkpoint-only marker
    assert tables_only.keep(_txn(600, X)).rows == ()  # x is not a span: #ddl's
    with_ddl = SpanBook({DDL_SPAN: SpanMark(1, "p")}, frozenset({T}))
    assert with_ddl.keep(ddl) is ddl
    assert len(with_ddl.keep(_txn(600, X)).rows) == 1
    with_ddl.hold(500, "p-before")
    assert with_ddl.marks[DDL_SPAN] == SpanMark(499, "p-before")
    assert with_ddl.others_reached({DDL_SPAN: 1, T: 499}, 499)
    assert not with_ddl.others_reached({DDL_SPAN: 1, T: 498}, 499)


def _state(entries: dict[bytes, bytes]) -> ClusterState:
    m = Mirror()
    for i, (k, v) in enumerate(entries.items(), start=2):
        m.apply(WatchEvent(WatchEventKind.PUT, k, v, i))
    return ClusterState.parse(KEYS, m)


def _cluster(captures: Sequence[str], spans: dict[str, tuple[str, int]]) -> dict[bytes, bytes]:
    out = {KEYS.capture_key(c): CaptureInfo(c, "h:1").to_json() for c in captures}
    out[KEYS.info_key(FEED)] = ChangeFeedInfo("default", "cf-1", "mysql://h/", 1).to_json()
    out[KEYS.status_key(FEED)] = ChangeFeedStatus(1, "p1").to_json()
    for span, (capture, ts) in spans.items():
        out[KEYS.table_key(FEED, span)] = TableAssign(capture).to_json()
        out[KEYS.progress_key(FEED, span)] = TableProgress(ts, f"p{ts}", capture).to_json()
    return out


def _plan(entries: dict[bytes, bytes]) -> dict[bytes, bytes]:
    state = _state(entries)
    groups: list[PatchGroup] = Scheduler(KEYS, state, Counter()).plan(state.feeds[FEED])
    out = dict(entries)
    for g in groups:
        for p in g.patches:
            new = p.fn(out.get(p.key))
            if new is None:
                out.pop(p.key, None)
            elif isinstance(new, bytes):
                out[p.key] = new
    return out


def _assign(entries: dict[bytes, bytes], span: str) -> TableAssign:
    return TableAssign.from_json(entries[KEYS.table_key(FEED, span)])


def test_new_spans_spread_evenly_and_tasks_follow_holders() -> None:
    entries = _cluster(["a", "b", "c"], {s: ("", 5) for s in ("#ddl", "s.1", "s.2", "s.3")})
    after = _plan(entries)
    held = Counter(_assign(after, s).capture for s in ("#ddl", "s.1", "s.2", "s.3"))
    assert sorted(held.values()) == [1, 1, 2]
    assert {c for c in "abc" if KEYS.task_key(c, FEED) in after} == set("abc")


def test_a_joining_capture_gets_spans_one_move_at_a_time() -> None:
    spans = {s: ("a", 10 + i) for i, s in enumerate(("#ddl", "s.1", "s.2", "s.3"))}
    entries = _cluster(["a", "b"], spans)
    after = _plan(entries)
    stopping = [s for s in spans if _assign(after, s).state is SpanState.STOPPING]
    assert len(stopping) == 1 and _assign(after, stopping[0]).capture == "a"
    assert _plan(after) == after  # nothing moves until a has released it
    span = stopping[0]
    key = KEYS.progress_key(FEED, span)
    after[key] = TableProgress(40, "p40", "").to_json()  # a stopped it there
    moved = _plan(after)
    assert _assign(moved, span) == TableAssign("b")
    assert TableProgress.from_json(moved[key]).checkpoint_ts == 40  # b resumes from there


def test_drain_empties_a_capture_and_a_dead_capture_loses_its_spans_at_once() -> None:
    entries = _cluster(["a", "b", "c"], {"#ddl": ("a", 5), "s.1": ("b", 5), "s.2": ("c", 5)})
    entries[KEYS.drain_key("b")] = b"{}"
    after = _plan(entries)
    assert _assign(after, "s.1") == TableAssign("b", SpanState.STOPPING)
    del after[KEYS.capture_key("c")]  # c's session expired
    moved = _plan(after)
    assert _assign(moved, "s.2").capture == "a"  # never to the draining b
    assert KEYS.task_key("c", FEED) not in moved


def test_status_checkpoint_is_the_minimum_of_the_spans() -> None:
    entries = _cluster(["a", "b"], {"#ddl": ("a", 70), "s.1": ("b", 50), "s.2": ("a", 90)})
    after = _plan(entries)
    status = ChangeFeedStatus.from_json(after[KEYS.status_key(FEED)])
    assert (status.checkpoint_ts, status.source_position) == (50, "p50")
