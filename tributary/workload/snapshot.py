"""Reading whole tables back, typed, to compare an upstream with a downstream.

A downstream SQLite file (the SQLite sink's) is read with ``SqliteUpstream`` like an SQLite
upstream: both keep values in the translator's text forms, and :func:`sinks.pump.values.typed` turns
MySQL driver values and those texts into the same typed values. :func:`read_rows` gives a
table's rows as a sorted list of tuples in the table info's column order, so two databases
hold the same contents exactly when their ``read_rows`` are equal.
"""

from __future__ import annotations

from tributary.sql import Statement
from tributary.workload.bank import total_balance_sql
from tributary.workload.catalog import Table
from tributary.workload.rows import RowOps
from tributary.workload.upstream import Upstream


def _order(row: tuple[object, ...]) -> tuple[str, ...]:
    return tuple(repr(v) for v in row)


async def read_rows(db: Upstream, table: Table) -> list[tuple[object, ...]]:
    """Every row of ``table`` (typed, in column order), sorted."""
    names = [c.name for c in table.info.row_columns]
    async with db.session() as session:
        rows = await RowOps(session, db.dialect).all(table)
    return sorted((tuple(r[n] for n in names) for r in rows), key=_order)


async def total_balance(db: Upstream, schema: str = "bank") -> int:
    """The bank's invariant: the sum of every account's balance."""
    async with db.session() as session:
        rows = await session.query(Statement(total_balance_sql(db.dialect, schema)))
    return int(rows[0][0] or 0)
