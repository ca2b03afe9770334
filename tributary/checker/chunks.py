"""Cutting a table into key ranges, and the SQL selecting one range on a source.

Boundaries come from one ordered pass over the upstream's key (keyset pagination: each page
is ``WHERE key > last ORDER BY key LIMIT chunk_size``, and a page's last key is a boundary).
With boundaries b1 < b2 < ... < bn the chunks are ``key <= b1``, ``b1 < key <= b2``, ...,
``key > bn``: the first and last are open, so a downstream row below or above every upstream
key still falls in a chunk, and every row is in exactly one chunk on each side (the sides
compare keys in the same order, which ``pairing`` checks before it allows chunking).

Worked example, key (a, b), chunk size 2, upstream rows (1,1) (1,2) (2,1) (3,5) (3,6):
pages [(1,1),(1,2)] [(2,1),(3,5)] [(3,6)] give boundaries (1,2) and (3,5), so three chunks:
``(a,b) <= (1,2)``, ``(1,2) < (a,b) <= (3,5)``, ``(a,b) > (3,5)``, where ``(a,b) > (1,2)`` is
rendered ``(a > 1 OR (a = 1 AND b > 2))``, a form every MySQL and SQLite version plans well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tributary.checker.canon import Row, canon_row
from tributary.checker.coltypes import ColumnType
from tributary.checker.model import TableName, Where
from tributary.checker.source import KeyTerm, Source


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int
    lo: Row | None  # exclusive lower bound (None: open)
    hi: Row | None  # inclusive upper bound (None: open)

    def describe(self, key: Sequence[str]) -> str:
        def fmt(row: Row) -> str:
            return "(" + ", ".join(f"{c}={v!r}" for c, v in zip(key, row, strict=True)) + ")"

        lo = f"{fmt(self.lo)} < " if self.lo is not None else ""
        hi = f" <= {fmt(self.hi)}" if self.hi is not None else ""
        return f"{lo}key{hi}" if lo or hi else "all rows"


def _compare(terms: Sequence[KeyTerm], values: Row, strict: str, last: str) -> Where:
    """``key <strict> values`` lexicographically, the last column compared with ``last``."""
    term, value = terms[0], values[0]
    arg = term.bind(value)
    if len(terms) == 1:
        return Where(f"{term.column_sql} {last} {term.param_sql}", (arg,))
    rest = _compare(terms[1:], values[1:], strict, last)
    sql = (
        f"({term.column_sql} {strict} {term.param_sql} OR "
        f"({term.column_sql} = {term.param_sql} AND ({rest.sql})))"
    )
    return Where(sql, (arg, arg, *rest.args))


def above(terms: Sequence[KeyTerm], values: Row) -> Where:
    """``key > values``."""
    return _compare(terms, values, ">", ">")


def at_most(terms: Sequence[KeyTerm], values: Row) -> Where:
    """``key <= values``."""
    return _compare(terms, values, "<", "<=")


def chunk_where(terms: Sequence[KeyTerm], chunk: Chunk) -> Where:
    parts = []
    if chunk.lo is not None:
        parts.append(above(terms, chunk.lo))
    if chunk.hi is not None:
        parts.append(at_most(terms, chunk.hi))
    return Where(" AND ".join(f"({p.sql})" for p in parts), tuple(a for p in parts for a in p.args))


def chunks_from(bounds: Sequence[Row]) -> list[Chunk]:
    """The chunks the boundaries cut: one more than there are boundaries."""
    edges: list[Row | None] = [None, *bounds, None]
    return [Chunk(i, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


async def boundaries(
    source: Source,
    name: TableName,
    terms: Sequence[KeyTerm],
    key: Sequence[str],
    types: Sequence[ColumnType],
    chunk_size: int,
) -> list[Row]:
    """Canonical key values cutting ``name`` on ``source`` into chunks of ``chunk_size`` rows.

    A boundary whose canonical form does not move past the previous one (a FLOAT key rounded
    to the same text) ends the pass: the rest of the table is the last chunk.
    """
    bounds: list[Row] = []
    after = Where()
    while True:
        page = await source.keys(name, terms, key, after, chunk_size)
        if len(page) < chunk_size:
            return bounds
        last = canon_row(types, page[-1])
        if bounds and last == bounds[-1]:
            return bounds
        bounds.append(last)
        after = above(terms, last)
