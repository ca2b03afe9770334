"""SQL text for row changes, in the MySQL and SQLite dialects.

Pure functions: no driver, no I/O. Every DML statement comes with its parameters and must be
executed with them, even when the tuple is empty: the MySQL drivers format ``%s`` placeholders
with Python's ``%``, so a ``%`` inside a MySQL identifier is written ``%%`` here.

Row identity (tidb-binlog's loader): UPDATE and DELETE find their row by the primary key, else by
the first unique key with no NULL, else by every column; MySQL adds ``LIMIT 1``. SQLite has no
``LIMIT`` there, so a keyless row is picked by ``rowid IN (SELECT rowid ... LIMIT 1)``.
Safe mode makes replays harmless: INSERT becomes REPLACE, UPDATE becomes DELETE + REPLACE.

SQLite has one namespace for tables: upstream ``schema.table`` becomes ``"schema__table"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

from tributary.change import Row, RowChange, RowKind, SqlValue, TableInfo


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    quote: str  # identifier quote character
    placeholder: str  # parameter marker of the driver
    limit_one: bool  # UPDATE/DELETE accept LIMIT 1
    schemas: bool  # tables live in schemas (else "schema__table")


MYSQL = Dialect("mysql", "`", "%s", limit_one=True, schemas=True)
SQLITE = Dialect("sqlite", '"', "?", limit_one=False, schemas=False)


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    args: tuple[SqlValue, ...] = ()


def quote(d: Dialect, name: str, *, params: bool = True) -> str:
    """A quoted identifier, for a statement executed with parameters unless ``params=False``."""
    q = d.quote
    text = f"{q}{name.replace(q, q + q)}{q}"
    return text.replace("%", "%%") if params and d.placeholder == "%s" else text


def sqlite_name(schema: str, table: str) -> str:
    """The SQLite table holding upstream ``schema.table``."""
    return f"{schema}__{table}" if schema else table


def table_name(d: Dialect, schema: str, table: str, *, params: bool = True) -> str:
    if d.schemas:
        qt = quote(d, table, params=params)
        return f"{quote(d, schema, params=params)}.{qt}" if schema else qt
    return quote(d, sqlite_name(schema, table), params=params)


def _table(d: Dialect, t: TableInfo) -> str:
    return table_name(d, t.schema, t.table)


def insert(d: Dialect, t: TableInfo, rows: Sequence[Row], *, replace: bool = False) -> Statement:
    """One (multi-row) INSERT or REPLACE; every row must have the same columns."""
    if not rows:
        raise ValueError("insert needs at least one row")
    first = rows[0].keys()
    names = [c for c in t.column_names if c in first]
    if len(names) != len(first) or not all(r.keys() == first for r in rows):
        raise ValueError(f"{t.qualified}: rows of one INSERT must have the same columns")
    one = "(" + ",".join([d.placeholder] * len(names)) + ")"
    verb = "REPLACE" if replace else "INSERT"
    cols = ",".join(quote(d, c) for c in names)
    sql = f"{verb} INTO {_table(d, t)} ({cols}) VALUES {','.join([one] * len(rows))}"
    if len(names) == 1:
        return Statement(sql, tuple(r[names[0]] for r in rows))
    return Statement(sql, tuple(chain.from_iterable(map(itemgetter(*names), rows))))


def _where(d: Dialect, t: TableInfo, row: Row) -> tuple[str, tuple[SqlValue, ...]]:
    parts: list[str] = []
    args: list[SqlValue] = []
    for c in t.where_columns(row):
        value = row.get(c)
        if value is None:
            parts.append(f"{quote(d, c)} IS NULL")
        else:
            parts.append(f"{quote(d, c)} = {d.placeholder}")
            args.append(value)
    return " AND ".join(parts), tuple(args)


def _identify(d: Dialect, t: TableInfo, row: Row) -> tuple[str, tuple[SqlValue, ...]]:
    """``WHERE ...`` (plus ``LIMIT 1`` where allowed) matching at most one row."""
    cond, args = _where(d, t, row)
    if d.limit_one:
        return f"WHERE {cond} LIMIT 1", args
    keyed = bool(t.primary_key) or any(
        all(row.get(c) is not None for c in u.columns) for u in t.unique_keys
    )
    if keyed:
        return f"WHERE {cond}", args
    return f"WHERE rowid IN (SELECT rowid FROM {_table(d, t)} WHERE {cond} LIMIT 1)", args


def update(d: Dialect, t: TableInfo, old: Row, new: Row) -> Statement:
    """UPDATE setting every column of ``new`` on the row identified by ``old``."""
    sets = ",".join(f"{quote(d, c)} = {d.placeholder}" for c in t.column_names if c in new)
    ident, args = _identify(d, t, old)
    values = tuple(new[c] for c in t.column_names if c in new)
    return Statement(f"UPDATE {_table(d, t)} SET {sets} {ident}", values + args)


def delete(d: Dialect, t: TableInfo, old: Row) -> Statement:
    ident, args = _identify(d, t, old)
    return Statement(f"DELETE FROM {_table(d, t)} {ident}", args)


def delete_many(d: Dialect, t: TableInfo, olds: Sequence[Row]) -> Statement:
    """One DELETE of many rows of a table with a primary key: ``WHERE (k1,k2) IN ((..),(..))``."""
    if not t.primary_key or not olds:
        raise ValueError(f"{t.qualified}: delete_many needs a primary key and rows")
    pk = t.primary_key
    if len(pk) == 1:
        target, one = quote(d, pk[0]), d.placeholder
    else:
        target = "(" + ",".join(quote(d, c) for c in pk) + ")"
        one = "(" + ",".join([d.placeholder] * len(pk)) + ")"
    sql = f"DELETE FROM {_table(d, t)} WHERE {target} IN ({','.join([one] * len(olds))})"
    return Statement(sql, tuple(r[c] for r in olds for c in pk))


def row_statements(d: Dialect, change: RowChange, *, safe: bool = False) -> list[Statement]:
    """The statements applying one row change (two for an UPDATE in safe mode)."""
    t = change.table
    if change.kind is RowKind.INSERT:
        return [insert(d, t, [change.values], replace=safe)]
    if change.kind is RowKind.DELETE:
        return [delete(d, t, change.values)]
    assert change.old_values is not None
    if safe:
        return [delete(d, t, change.old_values), insert(d, t, [change.values], replace=True)]
    return [update(d, t, change.old_values, change.values)]
