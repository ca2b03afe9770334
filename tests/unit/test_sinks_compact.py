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

from tributary.change import Row, RowChange, RowKind, TableInfo, Txn
from tributary.sinks.compact import Compacted, compact, late_tables
from tributary.sinks.mysql.apply import stretch_statements
from tributary.sinks.mysql.statements import chunks, compacted_statements, plain_statements
from tributary.sinks.port import SinkError

T = TableInfo.build("s", "t", [("id", "int"), ("u", "int"), ("v", "int")], ["id"], {"uk": ["u"]})
T_BEFORE_V = TableInfo.build("s", "t", [("id", "int"), ("u", "int")], ["id"], {"uk": ["u"]})
DEFAULT = -1  # the default of v downstream
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
        self.rows.append({"v": DEFAULT, **row})  # a row of the version before v: the default

    def replace(self, row: Row) -> None:
        self.rows = [r for r in self.rows if not self._collides(row, r)]
        self.rows.append({"v": DEFAULT, **row})

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


# TiDB's metadata lock lets a transaction that started at the schema version before an ALTER
# commit after the ALTER's binlog: its rows come with the table as it was, without the column.
OLD = TableInfo.build("tc", "load1", [("id", "int"), ("v", "int")], ["id"])
NEW = TableInfo.build("tc", "load1", [("id", "int"), ("v", "int"), ("c", "int")], ["id"])


def test_rows_of_two_schema_versions_keep_their_own_columns_and_their_order() -> None:
    late = [
        RowChange.insert(NEW, {"id": 1, "v": 1, "c": 5}),
        RowChange.insert(OLD, {"id": 2, "v": 2}),  # the late transaction
        RowChange.update(OLD, {"id": 1, "v": 1}, {"id": 1, "v": 7}),  # the same key, later
        RowChange.insert(NEW, {"id": 3, "v": 3, "c": 6}),
    ]
    other = RowChange.insert(T, row(1, "a"))
    for safe in (False, True):
        c = compact([other, *late], safe=safe)
        assert [tc.table for tc in c.tables] == [T] and c.in_order == tuple(late)
    stmts = compacted_statements(compact(late), safe=False)
    assert [(s.sql, s.args) for s in stmts] == [
        ("INSERT INTO `tc`.`load1` (`id`,`v`,`c`) VALUES (%s,%s,%s)", (1, 1, 5)),
        ("INSERT INTO `tc`.`load1` (`id`,`v`) VALUES (%s,%s)", (2, 2)),
        # an UPDATE of the columns the row had: c keeps the 5 the new version wrote
        ("UPDATE `tc`.`load1` SET `id` = %s,`v` = %s WHERE `id` = %s LIMIT 1", (1, 7, 1)),
        ("INSERT INTO `tc`.`load1` (`id`,`v`,`c`) VALUES (%s,%s,%s)", (3, 3, 6)),
    ]
    # A later row of a key wins whatever its version: deleted by the old version, inserted again.
    again = [
        RowChange.insert(NEW, {"id": 1, "v": 1, "c": 5}),
        RowChange.delete(OLD, {"id": 1, "v": 1}),
        RowChange.insert(OLD, {"id": 1, "v": 9}),
    ]
    stmts = compacted_statements(compact(again), safe=False)
    assert [(s.sql.split(" ")[0], s.args) for s in stmts] == [
        ("INSERT", (1, 1, 5)),
        ("DELETE", (1,)),
        ("INSERT", (1, 9)),
    ]


def before_v(change: RowChange) -> RowChange:
    """``change`` as a transaction that started before ``v`` was added writes it: without v."""

    def strip(r: Row) -> Row:
        return {k: x for k, x in r.items() if k != "v"}

    old = strip(change.old_values) if change.old_values is not None else None
    return RowChange(change.kind, T_BEFORE_V, strip(change.values), old)


@settings(max_examples=300, deadline=None)
@given(stretches(), st.data())
def test_rows_of_two_versions_land_as_one_by_one(
    case: tuple[Table, list[RowChange]], data: st.DataObject
) -> None:
    initial, changes = case
    late = data.draw(st.lists(st.booleans(), min_size=len(changes), max_size=len(changes)))
    mixed = [before_v(c) if old else c for c, old in zip(changes, late, strict=True)]
    expected = replayed(initial, mixed).state()
    for safe in (False, True):
        # Both versions in the stretch: compaction sees it alone. Only the late version: the
        # downstream has v all the same, which late_tables tells it.
        in_order = {("s", "t")} if all(late) else set()
        c = compact(mixed, safe=safe, in_order=in_order)
        down = initial.copy()
        down.apply_compacted(c)
        assert down.state() == expected
        compacted_statements(c, safe=safe, max_rows=3)  # every statement can be built


def test_late_rows_alone_would_reset_the_new_column_if_compacted() -> None:
    # After the ALTER ran downstream, a stretch of only the late transaction's rows.
    down = Table([{"id": 1, "u": 1, "v": 5}])
    late = [RowChange.update(T_BEFORE_V, {"id": 1, "u": 1}, {"id": 1, "u": 2})]
    compacted = down.copy()
    compacted.apply_compacted(compact(late))  # REPLACE (1,2): v back to the default
    assert compacted.state() == [(1, 2, DEFAULT)]
    down.apply_compacted(compact(late, in_order={("s", "t")}))  # UPDATE of u only
    assert down.state() == [(1, 2, 5)] == replayed(Table([{"id": 1, "u": 1, "v": 5}]), late).state()


def test_late_tables_are_those_of_transactions_behind_a_version_seen() -> None:
    def txn(ts: int, version: int, *tables: TableInfo) -> Txn:
        rows = tuple(RowChange.insert(t, {"id": ts}) for t in tables)
        return Txn(ts, ts - 1, rows=rows, schema_version=version)

    a, b, c = (TableInfo.build("s", n, [("id", "int")], ["id"]) for n in "abc")
    txns = [txn(10, 41, a), txn(20, 40, b), txn(30, 41, c), txn(40, 0, c)]
    assert late_tables(txns, 40) == {("s", "b")}  # behind the version 41 of ts 10
    assert late_tables(txns, 42) == {("s", "a"), ("s", "b"), ("s", "c")}
    assert late_tables(txns[2:], 0) == frozenset()  # no version (0) is never late


def test_one_schema_version_in_a_batch_is_compacted_as_before() -> None:
    # Definitions equal in columns and primary key (an index added in between) are one table.
    indexed = TableInfo.build("tc", "load1", [("id", "int"), ("v", "int")], ["id"], {"k": ["v"]})
    changes = [
        RowChange.insert(OLD, {"id": 1, "v": 1}),
        RowChange.update(indexed, {"id": 1, "v": 1}, {"id": 1, "v": 2}),
        RowChange.insert(OLD, {"id": 2, "v": 2}),
    ]
    [tc] = compact(changes).tables
    assert tc.inserts == ({"id": 1, "v": 2}, {"id": 2, "v": 2}) and tc.table is OLD
    # A primary key that changes between versions is a new definition: upstream order.
    keyless = TableInfo.build("tc", "load1", [("id", "int"), ("v", "int")])
    mixed = [*changes, RowChange.insert(keyless, {"id": 3, "v": 3})]
    assert compact(mixed) == Compacted((), tuple(mixed))


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


def test_rows_the_sink_cannot_write_are_a_sink_error_naming_the_transactions() -> None:
    # Not a row any translator makes (c is not a column of OLD): a clear, non-retriable error.
    bad = RowChange.decoded(RowKind.INSERT, OLD, {"id": 1, "v": 1, "c": 5})
    with pytest.raises(SinkError, match="commit ts 10 to 20: cannot build the statements") as e:
        stretch_statements([bad], safe=False, late=(), ts=(10, 20))
    assert not e.value.retriable and "tc.load1" in str(e.value)
