"""A MySQL, MariaDB or TiDB side, read through asyncmy on one connection.

Session setup: utf8mb4, ``time_zone`` from the URL (``?time-zone=``, default ``+00:00``, the
zone the drainer formats TIMESTAMP values in), backslash escapes on (the driver escapes with
them). Tables come from ``information_schema``, leaving out the system schemas and
``tidb_binlog`` (the checkpoint). MariaDB declares JSON as LONGTEXT with a ``json_valid``
check: such columns are found through ``information_schema.CHECK_CONSTRAINTS``.

Pushed-down checksum of a chunk: ``COUNT(*)`` and the sums of the two 64-bit halves of
``MD5`` over each row's columns, each written ``<byte length>:<bytes>`` or ``N`` for NULL so
no two rows share a text. Driver errors become ``SourceError`` (retriable by error code).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote

import asyncmy
from asyncmy.errors import InterfaceError, MySQLError

from tributary.checker.canon import Canon
from tributary.checker.coltypes import ColumnType, Kind, mysql_type
from tributary.checker.errors import SourceError, UsageError
from tributary.checker.model import ChunkSum, Column, Shape, TableName, Where
from tributary.checker.source import KeyTerm, SelectingSource, display_url
from tributary.sql import MYSQL, quote

log = logging.getLogger(__name__)

SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys", "metrics_schema")
CHECKPOINT_SCHEMA = "tidb_binlog"
_RETRIABLE = frozenset({1040, 1053, 1158, 1159, 1160, 1161, 1205, 1213, 1927, 2003, 2006, 2013})
_TABLES = (
    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
    "WHERE TABLE_TYPE = 'BASE TABLE' AND LOWER(TABLE_SCHEMA) NOT IN (%s, %s, %s, %s, %s, %s)"
)
_COLUMNS = (
    "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLLATION_NAME FROM information_schema.COLUMNS "
    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"
)
_INDEXES = (
    "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0 "
    "ORDER BY INDEX_NAME, SEQ_IN_INDEX"
)
_SCHEMA = "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s"
_HAS_CHECKS = (
    "SELECT COUNT(*) FROM information_schema.TABLES "
    "WHERE TABLE_SCHEMA = 'information_schema' AND TABLE_NAME = 'CHECK_CONSTRAINTS'"
)
_CHECKS = (
    "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
    "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s"
)


def _error(what: str, e: BaseException) -> SourceError:
    code = e.args[0] if isinstance(e, MySQLError) and e.args else None
    retriable = isinstance(e, InterfaceError | OSError) or code in _RETRIABLE
    return SourceError(f"{what}: {e}", retriable=retriable)


class MysqlSource(SelectingSource):
    kind = "mysql"
    placeholder = "%s"
    pushdown = True

    def __init__(self, conn: Any, url: SplitResult, database: str | None) -> None:
        self._conn = conn
        self._url = url
        self._lock = asyncio.Lock()
        self._json_checks: bool | None = None
        self.database = database

    @classmethod
    async def open(cls, url: SplitResult) -> MysqlSource:
        query = parse_qs(url.query)
        unknown = set(query) - {"time-zone"}
        if unknown or url.hostname is None:
            raise UsageError(f"bad MySQL URL {display_url(url)!r}: {sorted(unknown) or 'no host'}")
        time_zone = query.get("time-zone", ["+00:00"])[-1]
        database = unquote(url.path.lstrip("/")) or None
        try:
            port = url.port or 3306
            conn = await asyncmy.connect(
                host=url.hostname,
                port=port,
                user=unquote(url.username or ""),
                password=unquote(url.password or ""),
                charset="utf8mb4",
                autocommit=True,
                binary_prefix=True,
                connect_timeout=10,
            )
        except ValueError as e:
            raise UsageError(f"bad MySQL URL {display_url(url)!r}: {e}") from e
        except (MySQLError, OSError) as e:
            raise _error(f"cannot connect to {display_url(url)}", e) from e
        source = cls(conn, url, database)
        try:
            await source._query("SET SESSION time_zone = %s", (time_zone,))
            ((modes,),) = await source._query("SELECT @@SESSION.sql_mode")
            kept = [m for m in str(modes or "").split(",") if m and m != "NO_BACKSLASH_ESCAPES"]
            await source._query("SET SESSION sql_mode = %s", (",".join(kept),))
            if database is not None and not await source._query(_SCHEMA, (database,)):
                raise SourceError(f"{source.display_url()}: no database {database!r}")
        except BaseException:
            await source.close()
            raise
        return source

    def display_url(self) -> str:
        return display_url(self._url)

    async def _query(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        async with self._lock:
            try:
                async with self._conn.cursor() as cur:
                    await cur.execute(sql, tuple(args))
                    return [tuple(r) for r in await cur.fetchall()]
            except (MySQLError, OSError) as e:
                raise _error(f"{self.display_url()}: query failed", e) from e

    async def tables(self, schema: str | None) -> list[TableName]:
        sql, args = _TABLES, [*SYSTEM_SCHEMAS, CHECKPOINT_SCHEMA]
        if schema is not None:
            sql, args = sql + " AND TABLE_SCHEMA = %s", [*args, schema]
        return sorted(TableName(str(s), str(t)) for s, t in await self._query(sql, args))

    def locate(self, name: TableName) -> str:
        return f"{name.schema}\0{name.table}"

    def quote(self, name: str) -> str:
        return quote(MYSQL, name)

    def _table(self, name: TableName) -> str:
        return f"{self.quote(name.schema)}.{self.quote(name.table)}"

    async def shape(self, name: TableName) -> Shape:
        args = (name.schema, name.table)
        json_columns = await self._json_columns(name)
        columns = tuple(
            Column(
                str(n),
                mysql_type(str(t), is_json=str(n) in json_columns),
                str(t),
                nullable=nullable == "YES",
                collation=str(coll or ""),
            )
            for n, t, nullable, coll in await self._query(_COLUMNS, args)
        )
        if not columns:
            raise SourceError(f"{self.display_url()}: table {name} has no columns (dropped?)")
        indexes: dict[str, list[str]] = {}
        for index, column in await self._query(_INDEXES, args):
            indexes.setdefault(str(index), []).append(str(column))
        primary = tuple(indexes.pop("PRIMARY", ()))
        not_null = {c.name for c in columns if not c.nullable}
        unique = sorted(
            (tuple(cs) for cs in indexes.values() if not_null.issuperset(cs)),
            key=lambda cs: (len(cs), cs),
        )
        return Shape(name, columns, primary, tuple(unique))

    async def _json_columns(self, name: TableName) -> set[str]:
        if self._json_checks is None:
            self._json_checks = bool((await self._query(_HAS_CHECKS))[0][0])
        if not self._json_checks:
            return set()
        found = set()
        for (clause,) in await self._query(_CHECKS, (name.schema, name.table)):
            text = str(clause).strip()
            if text.lower().startswith("json_valid(`") and text.endswith("`)"):
                found.add(text[len("json_valid(`") : -2].replace("``", "`"))
        return found

    def key_term(self, column: Column, value_type: ColumnType) -> KeyTerm:
        return KeyTerm(self.quote(column.name), "%s", _binder(value_type))

    async def checksum(self, name: TableName, columns: Sequence[Column], where: Where) -> ChunkSum:
        parts = []
        for c in columns:
            b = f"CAST({self.quote(c.name)} AS BINARY)"
            parts.append(f"IFNULL(CONCAT(OCTET_LENGTH({b}), ':', {b}), 'N')")
        digest = f"MD5(CONCAT_WS(',', {', '.join(parts)}))"
        half = "CAST(CONV({}({}, 16), 16, 10) AS UNSIGNED)"
        cond = f" WHERE {where.sql}" if where.sql else ""
        sql = (
            f"SELECT COUNT(*), IFNULL(SUM({half.format('LEFT', digest)}), 0), "
            f"IFNULL(SUM({half.format('RIGHT', digest)}), 0) FROM {self._table(name)}{cond}"
        )
        ((count, high, low),) = await self._query(sql, where.args)
        return ChunkSum(int(count), (int(high) << 128) + int(low))

    async def close(self) -> None:
        self._conn.close()


def _binder(t: ColumnType) -> Any:
    """How a canonical key value is bound so MySQL compares it as the column's type: exact
    DECIMAL (a string would be compared as a double), numbers as numbers, the rest as text or
    bytes (a temporal column compares with a string as a temporal)."""

    def bind(v: Canon) -> object:
        if v is None or isinstance(v, bytes):
            return v
        if t.kind is Kind.DECIMAL:
            return Decimal(str(v))
        if t.kind in (Kind.FLOAT32, Kind.FLOAT64):
            return float(v)
        return v

    return bind
