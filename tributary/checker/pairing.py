"""How one upstream table is compared with its downstream counterpart: the plan.

* Columns: those on both sides, in upstream order; the others are reported.
* Value types: the side declaring a MySQL type wins (the SQLite sink stored values formatted
  from that type), upstream first.
* Key: the upstream's primary key, else its NOT NULL unique key, else the downstream's; with
  none, every column, and the rows are compared as a multiset.
* Chunking needs both sides to order the key alike (see ``chunks``). Both SQLite: the same
  declared type. Both MySQL: the same declared type and collation, or a kind compared by value
  (integers of any width, BIT, DECIMAL, temporals, binary strings). MySQL and SQLite: those
  kinds (the SQLite source orders their stored form like MySQL) and character keys under a
  binary (``_bin``) collation. Otherwise (a case-insensitive
  collation, ENUM, SET, floats) the table is one chunk: still exact, but held in memory.
* Checksums are computed in SQL only when both sides are MySQL and every compared column has
  the same declared type and collation on both (the same bytes then mean the same value).
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.checker.coltypes import ColumnType, Kind
from tributary.checker.model import Column, Shape

_ORDERED_ACROSS = frozenset(
    {Kind.INT, Kind.BIT, Kind.DECIMAL, Kind.DATE, Kind.DATETIME, Kind.TIME, Kind.BYTES}
)
_UNORDERED = ("enum", "set")


@dataclass(frozen=True, slots=True)
class Plan:
    up: Shape
    down: Shape
    columns: tuple[str, ...]  # compared columns, upstream order
    types: tuple[ColumnType, ...]  # their value types
    key: tuple[str, ...]  # identifying columns; () = none (rows compared as a multiset)
    key_kind: str
    chunked: bool
    pushdown: bool
    only_up: tuple[str, ...]
    only_down: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def type_of(self, column: str) -> ColumnType:
        return self.types[self.columns.index(column)]

    @property
    def key_index(self) -> tuple[int, ...]:
        return tuple(self.columns.index(k) for k in self.key)


def value_type(up: Column, down: Column) -> ColumnType:
    if up.type.native or not down.type.native:
        return up.type
    return down.type


def _same_declared(u: Column, d: Column) -> bool:
    return u.declared.lower() == d.declared.lower() and u.collation == d.collation


def same_order(u: Column, d: Column, t: ColumnType, up_kind: str, down_kind: str) -> bool:
    """Whether the two sources compare values of this key column the same way."""
    if any(c.declared.lower().startswith(_UNORDERED) for c in (u, d)):
        return False  # MySQL sorts ENUM/SET by index but compares them with text as text
    if up_kind == down_kind == "mysql" and u.type.kind is d.type.kind is t.kind:
        # Integers of any width, decimals of any precision, temporals: compared by value.
        return _same_declared(u, d) or t.kind in _ORDERED_ACROSS
    if up_kind == down_kind:
        return _same_declared(u, d)
    if t.kind in _ORDERED_ACROSS:
        return True
    mysql_column = u if up_kind == "mysql" else d
    return t.kind is Kind.TEXT and mysql_column.collation.endswith("_bin")


def _key(up: Shape, down: Shape, common: set[str]) -> tuple[tuple[str, ...], str]:
    for shape in (up, down):
        if shape.primary_key and common.issuperset(shape.primary_key):
            return shape.primary_key, "primary key"
    for shape in (up, down):
        for uk in shape.unique_keys:
            if common.issuperset(uk):
                return uk, "unique key"
    return (), "all columns"


def plan(up: Shape, down: Shape, up_kind: str, down_kind: str) -> Plan:
    """The plan comparing ``up`` (on a source of kind ``up_kind``) with ``down``."""
    down_names = set(down.column_names)
    columns = tuple(c for c in up.column_names if c in down_names)
    only_up = tuple(c for c in up.column_names if c not in down_names)
    only_down = tuple(c for c in down.column_names if c not in set(up.column_names))
    pairs = [(up.column(c), down.column(c)) for c in columns]
    types = tuple(value_type(u, d) for u, d in pairs)
    key, key_kind = _key(up, down, set(columns))
    notes: list[str] = []
    chunked = bool(key) and all(
        same_order(up.column(k), down.column(k), types[columns.index(k)], up_kind, down_kind)
        for k in key
    )
    if not key:
        notes.append("no primary or NOT NULL unique key: rows compared as a multiset, one chunk")
    elif not chunked:
        notes.append("the sides order the key differently: compared in one chunk")
    pushdown = (
        up_kind == down_kind == "mysql"
        and bool(pairs)
        and all(_same_declared(u, d) for u, d in pairs)
    )
    return Plan(
        up, down, columns, types, key, key_kind, chunked, pushdown, only_up, only_down,
        tuple(notes),
    )  # fmt: skip
