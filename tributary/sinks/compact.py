"""Batch compaction: the row changes of a stretch of transactions reduced, per table and primary
key value, to each touched row's final state, so a consistent-mode batch writes every row once.

Invariant: applying the compacted form (DELETE of the keys that end absent, then REPLACE of the
rows that existed before the stretch, then INSERT of the rows new to the table) to a table
that agrees with the upstream before the stretch gives the table the changes give applied one
by one in order, primary and unique keys alike. Tables without a primary key are not
compacted: their changes are handed back in upstream order.

Rows are written with the definition of their own schema version. A stretch may hold one table
under two definitions: TiDB's metadata lock lets a transaction that started before an ALTER
commit after the ALTER's binlog, its rows without the column added. Such a table (its rows
under different column sets or primary keys) is not compacted either: its changes go back in
upstream order, each with its own definition, so no statement mixes the two and an UPDATE of
the old version sets only the columns it knew (a REPLACE of it would reset the new column)::

    NEW INSERT (1,v=1,c=5)   OLD INSERT (2,v=2)   OLD UPDATE (1,v=1)->(1,v=7)
    -> INSERT (id,v,c) (1,1,5); INSERT (id,v) (2,2); UPDATE SET id=1,v=7 WHERE id=1

The old version's rows may also come alone, in a stretch after the ALTER ran downstream: the
stretch shows one definition, but the downstream table has the new column. ``late_tables``
finds them by schema version (a transaction below a version seen before it) and the sink
passes them as ``in_order``.

What the stream says about the table before the stretch: a key's first change tells whether
the row was there (UPDATE or DELETE of it) or not (INSERT, or the new key of an UPDATE that
changes the key). A row that ends present is written with REPLACE if it was there before and
with INSERT otherwise, so a diverged downstream (the row already there) fails as the plain
INSERT would; in safe mode every present row is a REPLACE and every absent key a DELETE, since
the downstream may hold rows of an earlier partial apply.

Worked example: table t(id PRIMARY KEY, u UNIQUE), downstream holding (1,a) and (2,b)::

    T1 INSERT (3,c)   T2 UPDATE (1,a)->(1,x)   T3 UPDATE (2,b)->(4,b)
    T4 DELETE (3,c)   T5 INSERT (5,a)

    key  there before  final   written
    3    no            absent  nothing (safe mode: DELETE)
    1    yes           (1,x)   REPLACE
    2    yes           absent  DELETE
    4    no            (4,b)   INSERT  (safe mode: REPLACE)
    5    no            (5,a)   INSERT  (safe mode: REPLACE)

    DELETE FROM t WHERE id IN (2); REPLACE INTO t VALUES (1,x); INSERT INTO t VALUES (4,b),(5,a)

Why this order is safe with unique keys: the final rows agree with each other and with the
rows the stretch does not touch (the upstream enforced its keys). So once the DELETEs ran, a
REPLACE can only push out a row still in its old state that the batch rewrites later, and when
the INSERTs run, every row that held one of their values is gone or rewritten: above, ``a``
moves from id 1 to id 5, and REPLACE (1,x) runs before INSERT (5,a).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tributary.change import Row, RowChange, RowKind, SqlValue, TableInfo, Txn

Key = tuple[SqlValue, ...]


@dataclass(frozen=True, slots=True)
class TableChanges:
    """One table's compacted changes, to run in this order: deletes, replaces, inserts."""

    table: TableInfo
    deletes: tuple[Row, ...]  # rows whose key values identify what to delete
    replaces: tuple[Row, ...]
    inserts: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class Compacted:
    tables: tuple[TableChanges, ...]  # compacted tables, in first-touched order
    in_order: tuple[RowChange, ...]  # changes of tables not compacted, in upstream order


@dataclass(slots=True)
class _KeyState:
    there_before: bool
    final: Row | None  # None: the key ends absent
    last_seen: Row  # the last row the key had (for the DELETE's key values)


class _Table:
    def __init__(self, table: TableInfo) -> None:
        self.table = table  # the definition the rows are written with
        self.keys: dict[Key, _KeyState] = {}
        self.faithful = True  # every change found the row present or absent as it expected
        self.mixed = False  # rows under another definition (columns or primary key) came
        self._pk = table.primary_key

    @property
    def compacting(self) -> bool:
        return bool(self._pk) and not self.mixed

    def see(self, t: TableInfo) -> None:
        """A run of changes of this table under ``t``: another definition makes it mixed."""
        if t is not self.table and (
            t.column_names != self.table.column_names or t.primary_key != self._pk
        ):
            self.mixed = True

    def key(self, row: Row) -> Key:
        if len(self._pk) == 1:
            return (row.get(self._pk[0]),)
        return tuple([row.get(c) for c in self._pk])

    def set(self, row: Row, present: bool, *, was_present: bool) -> None:
        """The key of ``row`` is now present (with ``row``) or absent; the change saw it
        ``was_present`` before (an INSERT: absent; an UPDATE or a DELETE: present)."""
        k = self.key(row)
        state = self.keys.get(k)
        if state is None:
            self.keys[k] = _KeyState(was_present, row if present else None, row)
            return
        if (state.final is not None) != was_present:
            self.faithful = False  # e.g. two INSERTs of one key: no upstream does that
        state.final = row if present else None
        state.last_seen = row

    def result(self, safe: bool) -> TableChanges:
        deletes: list[Row] = []
        replaces: list[Row] = []
        inserts: list[Row] = []
        for state in self.keys.values():
            if state.final is None:
                if state.there_before or safe:
                    deletes.append(state.last_seen)
            elif state.there_before or safe:
                replaces.append(state.final)
            else:
                inserts.append(state.final)
        return TableChanges(self.table, tuple(deletes), tuple(replaces), tuple(inserts))


def compact(
    changes: Sequence[RowChange],
    *,
    safe: bool = False,
    in_order: Collection[tuple[str, str]] = (),
) -> Compacted:
    """Final states per primary key of every table that has one (see the module docstring).

    A table whose changes no upstream could have made (an INSERT of a key the stretch holds,
    an UPDATE or DELETE of one it removed) is not compacted without safe mode, so that it
    fails downstream as the changes one by one would (in safe mode both ways agree). Neither
    are tables seen under two definitions, nor the ``(schema, table)`` named in ``in_order``.
    """
    tables: dict[tuple[str, str], _Table] = {}
    last: TableInfo | None = None
    acc: _Table | None = None
    for change in changes:
        t = change.table
        if t is not last:  # runs of one table are the rule: look it up once per run
            last, name = t, (t.schema, t.table)
            acc = tables.get(name)
            if acc is None:
                acc = tables[name] = _Table(t)
            else:
                acc.see(t)
            if not acc.compacting or name in in_order:
                acc = None
        if acc is None:
            continue
        if change.kind is RowKind.INSERT:
            acc.set(change.values, True, was_present=False)
        elif change.kind is RowKind.DELETE:
            acc.set(change.values, False, was_present=True)
        else:
            assert change.old_values is not None
            if acc.key(change.old_values) != acc.key(change.values):
                acc.set(change.old_values, False, was_present=True)
                acc.set(change.values, True, was_present=False)
            else:
                acc.set(change.values, True, was_present=True)
    kept = {
        name: a
        for name, a in tables.items()
        if a.compacting and (a.faithful or safe) and name not in in_order
    }
    if len(kept) == len(tables):
        return Compacted(tuple(a.result(safe) for a in kept.values()), ())
    rest = tuple(c for c in changes if (c.table.schema, c.table.table) not in kept)
    return Compacted(tuple(a.result(safe) for a in kept.values()), rest)


def late_tables(txns: Sequence[Txn], seen: int) -> frozenset[tuple[str, str]]:
    """The ``(schema, table)`` written by a transaction whose schema version is below one seen
    before it (``seen``: the newest before ``txns``): it started before a DDL that committed
    first, so its rows may lack what the DDL added. Example, ``seen`` 40::

        T1 v41 writes a   T2 v40 writes b   T3 v41 writes c   -> {b}  (T2 is behind T1)

    Transactions without a schema version (0) are never late.
    """
    late: set[tuple[str, str]] = set()
    for txn in txns:
        version = txn.schema_version
        if 0 < version < seen:
            late.update((c.table.schema, c.table.table) for c in txn.rows)
        seen = max(seen, version)
    return frozenset(late)
