"""The port every database side implements (``sources.open_source`` opens one by URL scheme).

A source reads only; it never changes the database. Invariant of ``key_term``: on a source,
the SQL comparing a key column with a bound value and the ``ORDER BY`` of ``keys`` use the
same order, so chunks cut from one ordered pass partition that source's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import SplitResult, urlunsplit

from tributary.checker.canon import Canon
from tributary.checker.coltypes import ColumnType
from tributary.checker.model import ChunkSum, Column, Shape, TableName, Where


@dataclass(frozen=True, slots=True)
class KeyTerm:
    """How a source compares one key column: ``column_sql`` is the column's order expression,
    ``param_sql`` a bound value's (one placeholder), ``bind`` turns a canonical value into the
    parameter."""

    column_sql: str
    param_sql: str
    bind: Callable[[Canon], object]


class Source(Protocol):
    kind: str  # "mysql" or "sqlite"
    placeholder: str  # the driver's parameter marker
    database: str | None  # the database the URL names, if any
    pushdown: bool  # whether ``checksum`` is available

    def display_url(self) -> str:
        """The URL without its password."""
        ...

    async def tables(self, schema: str | None) -> list[TableName]:
        """Base tables (of ``schema`` only, if given), without system and checkpoint tables."""
        ...

    def locate(self, name: TableName) -> str:
        """The identity of ``name`` on this source (two names are the same table if equal)."""
        ...

    async def shape(self, name: TableName) -> Shape: ...

    def quote(self, name: str) -> str:
        """A quoted identifier for SQL executed with parameters."""
        ...

    def key_term(self, column: Column, value_type: ColumnType) -> KeyTerm: ...

    async def keys(
        self,
        name: TableName,
        key: Sequence[KeyTerm],
        columns: Sequence[str],
        after: Where,
        limit: int,
    ) -> list[tuple[object, ...]]:
        """Up to ``limit`` key tuples matching ``after``, in the order of ``key``."""
        ...

    async def rows(
        self, name: TableName, columns: Sequence[str], where: Where
    ) -> list[tuple[object, ...]]:
        """The values of ``columns`` of every row matching ``where``, as the driver returns them."""
        ...

    async def checksum(self, name: TableName, columns: Sequence[Column], where: Where) -> ChunkSum:
        """Row count and hash sum computed in the database (only if ``pushdown``)."""
        ...

    async def close(self) -> None: ...


class SelectingSource:
    """``keys`` and ``rows`` for a source that can quote a name, name a table in SQL and run a
    query (both sources do it the same way; only their quoting and placeholders differ)."""

    def quote(self, name: str) -> str:
        raise NotImplementedError

    def _table(self, name: TableName) -> str:
        raise NotImplementedError

    async def _query(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def keys(
        self,
        name: TableName,
        key: Sequence[KeyTerm],
        columns: Sequence[str],
        after: Where,
        limit: int,
    ) -> list[tuple[object, ...]]:
        cols = ", ".join(self.quote(c) for c in columns)
        where = f" WHERE {after.sql}" if after.sql else ""
        order = ", ".join(t.column_sql for t in key)
        sql = f"SELECT {cols} FROM {self._table(name)}{where} ORDER BY {order} LIMIT {int(limit)}"
        return await self._query(sql, after.args)

    async def rows(
        self, name: TableName, columns: Sequence[str], where: Where
    ) -> list[tuple[object, ...]]:
        cols = ", ".join(self.quote(c) for c in columns)
        cond = f" WHERE {where.sql}" if where.sql else ""
        return await self._query(f"SELECT {cols} FROM {self._table(name)}{cond}", where.args)


def display_url(url: SplitResult) -> str:
    """``url`` with the password left out."""
    netloc = url.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    if not netloc:  # urlunsplit would drop the "//" of sqlite:///abs/path
        query = f"?{url.query}" if url.query else ""
        return f"{url.scheme}://{url.path}{query}"
    return urlunsplit(url._replace(netloc=netloc))
