"""Batch compaction (``sinks.compact``) against a pure model of a MySQL table, and the
statements the MySQL sink makes of it (``sinks.mysql.statements``).

The model keeps MySQL's rules for a table with a primary key and a unique key (NULLs may
repeat): INSERT fails on any duplicate, REPLACE first deletes every row it collides with,
UPDATE of a missing row changes nothing. Hypothesis draws a table and a stretch of changes the
upstream accepted, and checks that the compacted form lands on the same table as the changes
applied one by one: from the state before the stretch, and in safe mode from the state after
any prefix of it (a replay over a partial apply).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.change import Row, RowChange, RowKind, TableInfo
from tributary.sinks.compact import Compacted, compact
from tributary.sinks.mysql.statements import chunks, compacted_statements, plain_statements

T = TableInfo.build("s", "t", [("id", "int"), ("u", "int"), ("v", "int")], ["id"], {"uk": ["u"]})
BARE = TableInfo.build("s", "log", [("k", "int"), ("v", "int")])


class Duplicate(Exception):
    pass


@dataclass
class Table:
    rows: list[dict[str, Any]] = field(default_factory=list)

    def _collides(self, row: Row, other: dict[str, Any]) -> bool:
        return other["id"] == row["id"] or (row["u"] is not None and other["u"] == row["u"])

    def insert(self, row: Row) -> None:
        if any(self._collides(row, r) for r in self.rows):
            raise Duplicate(row)
        self.rows.append(dict(row))

    def replace(self, row: Row) -> None:
        self.rows = [r for r in self.rows if not self._collides(row, r)]
        self.rows.append(dict(row))

    def delete(self, row: Row) -> None:
        self.rows = [r for r in self.rows if r["id"] != row["id"]]

    def update(self, old: Row, new: Row) -> None:
        hit = [r for r in self.rows if r["id"] == old["id"]]
        if not hit:
            return
        if any(self._collides(new, r) for r in self.rows if r is not hit[0]):
            raise Duplicate(new)
        hit[0].update(new)

    def apply(self, change: RowChange) -> None:
        if change.kind is RowKind.INSERT:
            self.insert(change.values)
        elif change.kind is RowKind.DELETE:
            self.delete(change.values)
        else:
            assert change.old_values is not None
            self.update(change.old_values, change.values)

    def apply_compacted(self, c: Compacted) -> None:
        for tc in c.tables:
            for r in tc.deletes:
                self.delete(r)
            for r in tc.replaces:
                self.replace(r)
            for r in tc.inserts:
                self.insert(r)
        for change in c.in_order:
            self.apply(change)

    def copy(self) -> Table:
        return Table([dict(r) for r in self.rows])

    def state(self) -> list[tuple[Any, ...]]:
        return sorted((r["id"], r["u"], r["v"]) for r in self.rows)


ids = st.integers(0, 7)
uniques = st.none() | st.integers(0, 4)
values = st.integers(0, 3)


@st.composite
def stretches(draw: st.DrawFn) -> tuple[Table, list[RowChange]]:
    """A table, and changes the upstream accepted one after the other from it."""
    table = Table()
    for id_, u, v in draw(st.lists(st.tuples(ids, uniques, values), max_size=6)):
        try:
            table.insert({"id": id_, "u": u, "v": v})
        except Duplicate:
            pass
    initial, upstream = table.copy(), table
    changes: list[RowChange] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(RowKind))
        new = {"id": draw(ids), "u": draw(uniques), "v": draw(values)}
        if kind is RowKind.INSERT:
            change = RowChange.insert(T, new)
        elif not upstream.rows:
            continue
        else:
            old = dict(draw(st.sampled_from(upstream.rows)))
            if kind is RowKind.DELETE:
                change = RowChange.delete(T, old)
            else:
                change = RowChange.update(
                    T, old, new if draw(st.booleans()) else {**new, **{"id": old["id"]}}
                )
        try:
            upstream.apply(change)
        except Duplicate:
            continue  # the upstream refused it
        changes.append(change)
    return initial, changes


def replayed(table: Table, changes: list[RowChange]) -> Table:
    out = table.copy()
    for c in changes:
        out.apply(c)
    return out


@settings(max_examples=400, deadline=None)
@given(stretches())
def test_compacted_equals_changes_in_order(case: tuple[Table, list[RowChange]]) -> None:
    initial, changes = case
    expected = replayed(initial, changes).state()
    for safe in (False, True):
        down = initial.copy()
        down.apply_compacted(compact(changes, safe=safe))
        assert down.state() == expected


@settings(max_examples=300, deadline=None)
@given(stretches(), st.data())
def test_safe_mode_converges_from_any_partial_apply(
    case: tuple[Table, list[RowChange]], data: st.DataObject
) -> None:
    initial, changes = case
    expected = replayed(initial, changes).state()
    k = data.draw(st.integers(0, len(changes)))
    down = replayed(initial, changes[:k])  # a crash after k changes, outside a transaction
    down.apply_compacted(compact(changes, safe=True))
    assert down.state() == expected


def row(id_: int, u: str) -> dict[str, Any]:
    return {"id": id_, "u": u, "v": 0}


def test_the_worked_example() -> None:
    changes = [
        RowChange.insert(T, row(3, "c")),
        RowChange.update(T, row(1, "a"), row(1, "x")),
        RowChange.update(T, row(2, "b"), row(4, "b")),
        RowChange.delete(T, row(3, "c")),
        RowChange.insert(T, row(5, "a")),
    ]
    [tc] = compact(changes).tables
    assert (tc.deletes, tc.replaces, tc.inserts) == (
        (row(2, "b"),),
        (row(1, "x"),),
        (row(4, "b"), row(5, "a")),
    )
    [tc] = compact(changes, safe=True).tables
    assert [r["id"] for r in tc.deletes] == [3, 2]
    assert [r["id"] for r in tc.replaces] == [1, 4, 5] and tc.inserts == ()


def test_a_diverged_downstream_still_fails_without_safe_mode() -> None:
    down = Table([{"id": 1, "u": None, "v": 0}])  # the upstream says id 1 is new
    c = compact([RowChange.insert(T, {"id": 1, "u": None, "v": 9})])
    with pytest.raises(Duplicate):
        down.apply_compacted(c)
    down.apply_compacted(compact([RowChange.insert(T, {"id": 1, "u": None, "v": 9})], safe=True))
    assert down.state() == [(1, None, 9)]


def test_tables_without_primary_key_keep_their_changes_in_order() -> None:
    changes = [
        RowChange.insert(BARE, {"k": 1, "v": 1}),
        RowChange.insert(T, row(1, "a")),
        RowChange.update(BARE, {"k": 1, "v": 1}, {"k": 1, "v": 2}),
        RowChange.delete(BARE, {"k": 1, "v": 2}),
        RowChange.delete(T, row(1, "a")),
    ]
    c = compact(changes)
    assert c.in_order == (changes[0], changes[2], changes[3])
    [tc] = c.tables
    assert (tc.deletes, tc.replaces, tc.inserts) == ((), (), ())  # inserted, then deleted


def test_changes_no_upstream_makes_are_not_compacted_without_safe_mode() -> None:
    twice = [RowChange.insert(T, row(1, "a")), RowChange.insert(T, row(1, "b"))]
    gone = [RowChange.delete(T, row(2, "a")), RowChange.update(T, row(2, "a"), row(2, "b"))]
    other = RowChange.insert(BARE, {"k": 1, "v": 1})
    for changes in (twice, gone):
        c = compact([*changes, other])
        assert c.tables == () and c.in_order == (*changes, other)
        with pytest.raises(Duplicate) if changes is twice else contextlib.nullcontext():
            Table().apply_compacted(c)  # fails (or not) as the changes one by one do
        [tc] = compact(changes, safe=True).tables  # safe mode: the same either way
        assert tc.replaces == (changes[-1].values,)


def test_tables_are_told_apart_by_schema_and_name() -> None:
    other = TableInfo.build("s2", "t", [("id", "int"), ("u", "int"), ("v", "int")], ["id"])
    c = compact([RowChange.insert(T, row(1, "a")), RowChange.insert(other, row(1, "a"))])
    assert [(tc.table.schema, len(tc.inserts)) for tc in c.tables] == [("s", 1), ("s2", 1)]


# -- the statements (sinks.mysql.statements) ----------------------------------------------------


def test_chunks_cut_at_rows_bytes_and_column_sets() -> None:
    rows: list[Row] = [{"a": i} for i in range(5)] + [{"a": 5, "b": "x" * 50}, {"a": 6, "b": "y"}]
    parts = [[r["a"] for r in part] for part in chunks(rows, max_rows=2, max_bytes=1000)]
    assert parts == [[0, 1], [2, 3], [4], [5, 6]]
    parts = [[r["a"] for r in part] for part in chunks(rows, max_rows=100, max_bytes=40)]
    assert parts == [[0, 1, 2], [3, 4], [5], [6]]  # 12 bytes a row; the 66-byte row alone


def test_compacted_statements_of_the_worked_example() -> None:
    changes = [
        RowChange.insert(T, row(3, "c")),
        RowChange.update(T, row(1, "a"), row(1, "x")),
        RowChange.update(T, row(2, "b"), row(4, "b")),
        RowChange.delete(T, row(3, "c")),
        RowChange.insert(T, row(5, "a")),
        RowChange.insert(BARE, {"k": 1, "v": 1}),
    ]
    stmts = compacted_statements(compact(changes), safe=False, max_rows=1)
    assert [(s.sql.split(" ")[0], s.args) for s in stmts] == [
        ("DELETE", (2,)),
        ("REPLACE", (1, "x", 0)),
        ("INSERT", (4, "b", 0)),
        ("INSERT", (5, "a", 0)),  # max_rows=1: one statement a row
        ("INSERT", (1, 1)),
    ]
    [one] = compacted_statements(compact(changes[4:5]), safe=False)
    assert one.sql == "INSERT INTO `s`.`t` (`id`,`u`,`v`) VALUES (%s,%s,%s)"


def test_plain_statements_merge_consecutive_inserts_only() -> None:
    a, b = {"k": 1, "v": 1}, {"k": 2, "v": 2}
    changes = [
        RowChange.insert(BARE, a),
        RowChange.insert(BARE, b),
        RowChange.update(BARE, b, {"k": 2, "v": 3}),
        RowChange.insert(BARE, {"k": 3, "v": 3}),
        RowChange.insert(T, row(1, "a")),
        RowChange.delete(BARE, a),
    ]
    stmts = plain_statements(changes, safe=False)
    assert [(s.sql.split(" ")[0], len(s.args)) for s in stmts] == [
        ("INSERT", 4),
        ("UPDATE", 4),
        ("INSERT", 2),
        ("INSERT", 3),
        ("DELETE", 2),
    ]
    safe = plain_statements(changes[1:4], safe=True)  # UPDATE: DELETE + REPLACE, merged on
    assert [(s.sql.split(" ")[0], s.args) for s in safe] == [
        ("REPLACE", (2, 2)),
        ("DELETE", (2, 2)),
        ("REPLACE", (2, 3, 3, 3)),
    ]
