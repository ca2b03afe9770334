"""Row statements on the upstream: locking reads, inserts, updates and deletes of typed rows.

Text comes from ``tributary.sql`` (the same rules a drainer uses downstream: a row is identified by
its primary key, else its first unique key without NULL, else all its columns) plus the
locking ``SELECT ... FOR UPDATE`` (plain SELECT on SQLite, whose ``BEGIN IMMEDIATE`` already
excludes other writers). Values travel in their stored form (:func:`sinks.pump.values.stored`) and
come back typed (:func:`sinks.pump.values.typed`), so a row read here can be written into a binlog
and compared with what the drainer wrote downstream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tributary import sql
from tributary.change import SqlValue
from tributary.sinks.pump.values import Value, stored, typed
from tributary.workload.catalog import Table
from tributary.workload.upstream import Session

Row = dict[str, Value]


def _encode(table: Table, row: Mapping[str, Value]) -> dict[str, SqlValue]:
    out: dict[str, SqlValue] = {}
    for col in table.columns:
        if col.name in row:
            out[col.name] = stored(row[col.name], col.ft)
    return out


def _decode(table: Table, raw: Sequence[object]) -> Row:
    return {c.name: typed(v, c.ft) for c, v in zip(table.columns, raw, strict=True)}


def select_sql(
    d: sql.Dialect,
    table: Table,
    where: str,
    args: tuple[SqlValue, ...],
    *,
    order_by: str | None = None,
    limit: int | None = None,
    for_update: bool = False,
) -> sql.Statement:
    cols = ", ".join(sql.quote(d, c.name) for c in table.columns)
    text = f"SELECT {cols} FROM {sql.table_name(d, table.schema, table.name)}"
    text += f" WHERE {where}" if where else ""
    text += f" ORDER BY {sql.quote(d, order_by)}" if order_by else ""
    text += f" LIMIT {int(limit)}" if limit is not None else ""
    text += " FOR UPDATE" if for_update and d.name == "mysql" else ""
    return sql.Statement(text, args)


class RowOps:
    """Typed row operations of one session (one transaction at a time)."""

    def __init__(self, session: Session, dialect: sql.Dialect) -> None:
        self.session = session
        self.dialect = dialect

    async def get(self, table: Table, key: Mapping[str, Value], *, lock: bool = True) -> Row | None:
        """The row whose columns equal ``key`` (a primary or unique key), locked."""
        enc = _encode(table, key)
        where = " AND ".join(
            f"{sql.quote(self.dialect, c)} = {self.dialect.placeholder}" for c in enc
        )
        stmt = select_sql(self.dialect, table, where, tuple(enc.values()), limit=1, for_update=lock)
        rows = await self.session.query(stmt)
        return _decode(table, rows[0]) if rows else None

    async def scan(
        self, table: Table, column: str, start: Value, limit: int, *, lock: bool = True
    ) -> list[Row]:
        """Up to ``limit`` rows with ``column >= start`` in ``column`` order, locked."""
        col = table.info.column(column)
        if col is None:
            raise ValueError(f"{table.qualified} has no column {column}")
        where = f"{sql.quote(self.dialect, col.name)} >= {self.dialect.placeholder}"
        stmt = select_sql(
            self.dialect,
            table,
            where,
            (stored(start, col.ft),),
            order_by=col.name,
            limit=limit,
            for_update=lock,
        )
        return [_decode(table, r) for r in await self.session.query(stmt)]

    async def all(self, table: Table) -> list[Row]:
        stmt = select_sql(self.dialect, table, "", ())
        return [_decode(table, r) for r in await self.session.query(stmt)]

    async def max(self, table: Table, column: str) -> Value:
        d = self.dialect
        text = (
            f"SELECT MAX({sql.quote(d, column)}) FROM {sql.table_name(d, table.schema, table.name)}"
        )
        col = table.info.column(column)
        rows = await self.session.query(sql.Statement(text))
        return typed(rows[0][0], col.ft) if rows and col is not None else None

    async def insert(self, table: Table, rows: Sequence[Mapping[str, Value]]) -> None:
        await self.session.execute(
            sql.insert(self.dialect, table.sink, [_encode(table, r) for r in rows])
        )

    async def update(
        self, table: Table, old: Mapping[str, Value], new: Mapping[str, Value]
    ) -> None:
        stmt = sql.update(self.dialect, table.sink, _encode(table, old), _encode(table, new))
        await self.session.execute(stmt)

    async def delete(self, table: Table, old: Mapping[str, Value]) -> None:
        await self.session.execute(sql.delete(self.dialect, table.sink, _encode(table, old)))
