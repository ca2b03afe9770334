"""Cutting a table into primary-key ranges for a parallel snapshot read, as SQL text.

The bulk load reads one range per Spark partition (``spark.read.jdbc(..., predicates=...)``).
Boundaries are real keys taken in primary-key order on the source (``split_points``), so the
ranges hold about the same number of rows whatever the key's type and distribution.

Invariant: the predicates cover every row exactly once. With boundaries b1 < ... < bn they are
``key < b1``, ``b1 <= key < b2``, ..., ``key >= bn`` (first open below, last open above,
half-open in between). For each row and boundary exactly one of ``key < b`` / ``key >= b``
holds (a key is never NULL), so this needs only that every session compares the way the
boundaries were ordered: the same collation (string literals carry the column's charset and an
explicit ``COLLATE`` of the column's collation, so the connection's charset does not matter)
and the same time zone for TIMESTAMP (the readers run ``SET time_zone`` like the control
session, see ``services.spark.bulkload``). Literals are exact: integers and decimals as the
server's own text, strings and binary strings as hex of the stored bytes, temporal values as
the server's text. Keys of other types (FLOAT, DOUBLE, BIT, ENUM, SET, ...) are not split: one
range, read by one partition.

A composite comparison is written out, ``(a, b) >= (x, y)`` as ``(a > x OR (a = x AND b >= y))``:
MariaDB 10.11 plans the row-constructor form as a full scan and the expanded one as a range on
the primary key (EXPLAIN: ``type: range, key: PRIMARY``).

Worked example, key (a INT, b VARCHAR COLLATE utf8mb4_general_ci), 3 partitions, 7 rows in key
order (1,'a') (1,'B') (1,'c') (2,'a') (2,'b') (3,'x') (4,'y'): step = ceil(7/3) = 3; the first
boundary is the row at offset 3, (2,'a'); the next one the row at offset 2 after it, (4,'y').
Cells come back as ('2', '61') and ('4', '79') (integers as text, strings as hex), and the
predicates are (L(v) standing for ``_utf8mb4 X'..' COLLATE utf8mb4_general_ci``)::

    (`a` < 2 OR (`a` = 2 AND `b` < L('a')))                            3 rows
    (`a` > 2 OR (`a` = 2 AND `b` >= L('a'))) AND
        (`a` < 4 OR (`a` = 4 AND `b` < L('y')))                         3 rows
    (`a` > 4 OR (`a` = 4 AND `b` >= L('y')))                             1 row
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Cells = tuple[str, ...]
Query = Callable[[str], list[tuple[str | None, ...]]]

_INTEGER = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_DECIMAL = frozenset({"decimal", "numeric", "dec", "fixed"})
_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_TEMPORAL = frozenset({"date", "datetime", "timestamp", "time"})

_INT_CELL = re.compile(r"-?[0-9]+")
_DECIMAL_CELL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_HEX_CELL = re.compile(r"(?:[0-9A-Fa-f]{2})*")
_TEMPORAL_CELL = re.compile(r"-?[0-9][0-9 :.-]{0,40}")  # digits and separators only: no quote
_NAME = re.compile(r"[A-Za-z0-9_]+")


class SplitError(ValueError):
    """A boundary cell or a column description cannot be turned into safe SQL."""


def ident(name: str) -> str:
    """A MySQL identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


def string_literal(text: str) -> str:
    """A MySQL string literal for ``text`` (names, a time zone) read the same with and without
    ``NO_BACKSLASH_ESCAPES``: quotes doubled, and hex when there is a backslash."""
    if "\\" in text:
        return f"_utf8mb4 X'{text.encode().hex().upper()}'"
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class KeyColumn:
    """One primary-key column as information_schema describes it."""

    name: str
    data_type: str  # information_schema.columns.data_type, e.g. "varchar"
    charset: str | None = None  # character_set_name: None for non-strings and binary strings
    collation: str | None = None  # collation_name

    @property
    def kind(self) -> str | None:
        """``int``, ``decimal``, ``text``, ``binary``, ``temporal``; None: not splittable."""
        t = self.data_type.lower()
        for kind, types in (
            ("int", _INTEGER),
            ("decimal", _DECIMAL),
            ("binary", _BINARY),
            ("temporal", _TEMPORAL),
        ):
            if t in types:
                return kind
        if t in _TEXT:
            return "text" if self.charset and self.collation else "binary"
        return None

    def cell_sql(self) -> str:
        """The expression selecting this column's value as a boundary cell (exact text)."""
        if self.kind in ("text", "binary"):
            return f"HEX({ident(self.name)})"
        return f"CAST({ident(self.name)} AS CHAR)"

    def literal(self, cell: str) -> str:
        """The SQL literal of a cell ``cell_sql`` returned; SplitError when it is not one."""
        kind = self.kind
        patterns = {
            "int": _INT_CELL,
            "decimal": _DECIMAL_CELL,
            "text": _HEX_CELL,
            "binary": _HEX_CELL,
            "temporal": _TEMPORAL_CELL,
        }
        if kind is None or not patterns[kind].fullmatch(cell):
            raise SplitError(f"{self.name} ({self.data_type}): no exact literal for {cell!r}")
        if kind in ("int", "decimal"):
            return cell
        if kind == "temporal":
            return f"'{cell}'"
        if kind == "binary":
            return f"X'{cell}'"
        charset, collation = self.charset or "", self.collation or ""
        if not (_NAME.fullmatch(charset) and _NAME.fullmatch(collation)):
            raise SplitError(f"{self.name}: unexpected charset/collation {charset}/{collation}")
        return f"_{charset} X'{cell}' COLLATE {collation}"


def splittable(key: Sequence[KeyColumn]) -> bool:
    return bool(key) and all(c.kind is not None for c in key)


def _compare(key: Sequence[KeyColumn], cells: Cells, strict: str, last: str) -> str:
    """``key <op> cells`` in key order: the first columns compared by ``strict``, the last
    column by ``last`` (``>``/``>=`` for a lower bound, ``<`` for an upper one)."""
    col, lit = ident(key[0].name), key[0].literal(cells[0])
    if len(key) == 1:
        return f"{col} {last} {lit}"
    rest = _compare(key[1:], cells[1:], strict, last)
    return f"({col} {strict} {lit} OR ({col} = {lit} AND {rest}))"


def at_least(key: Sequence[KeyColumn], cells: Cells) -> str:
    return _compare(key, cells, ">", ">=")


def above(key: Sequence[KeyColumn], cells: Cells) -> str:
    return _compare(key, cells, ">", ">")


def below(key: Sequence[KeyColumn], cells: Cells) -> str:
    return _compare(key, cells, "<", "<")


def predicates(key: Sequence[KeyColumn], bounds: Sequence[Cells]) -> list[str]:
    """One WHERE condition per range cut by ``bounds`` (ascending): ``len(bounds) + 1`` of them."""
    if not bounds:
        return ["1 = 1"]
    out = [below(key, bounds[0])]
    for lo, hi in itertools.pairwise(bounds):
        out.append(f"{at_least(key, lo)} AND {below(key, hi)}")
    out.append(at_least(key, bounds[-1]))
    return out


def boundary_sql(table_sql: str, key: Sequence[KeyColumn], after: Cells | None, offset: int) -> str:
    """The key ``offset`` rows past ``after`` (past the start when None), as cells."""
    cells = ", ".join(c.cell_sql() for c in key)
    order = ", ".join(ident(c.name) for c in key)
    where = f" WHERE {above(key, after)}" if after is not None else ""
    return f"SELECT {cells} FROM {table_sql}{where} ORDER BY {order} LIMIT 1 OFFSET {offset}"


def split_points(
    query: Query, table_sql: str, key: Sequence[KeyColumn], rows: int, partitions: int
) -> list[Cells]:
    """Up to ``partitions - 1`` boundaries about ``rows / partitions`` rows apart.

    Each query starts after the previous boundary (a range scan of the primary key), so all of
    them together read the key once: on a 1M-row table COUNT(*) plus three boundaries take about
    as long as one COUNT(*) more, well under the time Spark takes to read the rows themselves.
    """
    if partitions < 2 or rows < 2 or not splittable(key):
        return []
    step = math.ceil(rows / partitions)
    bounds: list[Cells] = []
    after: Cells | None = None
    for _ in range(partitions - 1):
        got = query(boundary_sql(table_sql, key, after, step if after is None else step - 1))
        if not got:
            break
        cells = got[0]
        if any(c is None for c in cells):
            raise SplitError(f"{table_sql}: a primary-key cell is NULL")
        after = tuple(str(c) for c in cells)
        bounds.append(after)
    return bounds
