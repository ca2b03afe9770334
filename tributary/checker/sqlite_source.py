"""A side held in an SQLite file written by the SQLite sink, read through aiosqlite.

The file is opened read-only. Upstream ``db.table`` is the SQLite table ``db__table`` (split at
the first ``__``; ``sql.sqlite_name``); the sink's ``tidb_binlog__checkpoint`` and
SQLite's own ``sqlite_*`` tables are never listed. SQLite keeps only affinities, so the value
types come from the other side (``pairing.value_type``).

Key order: SQLite compares the stored form, which for most kinds sorts like MySQL (integers,
'YYYY-MM-DD ...' text, BLOBs byte by byte, UTF-8 text by code point). Three kinds do not, and
are compared through SQL functions registered on the connection that return a form that does:
DECIMAL text ('10.00' < '9.00' as text) through ``tributary_dec``, TIME text ('-01:00:00',
'100:00:00') through ``tributary_time`` (microseconds), and ``bigint unsigned`` (stored as an
integer, or as decimal text past 2^63) through ``tributary_u64`` (20-digit text).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from urllib.parse import SplitResult, unquote

import aiosqlite

from tributary.checker.canon import Canon, canon
from tributary.checker.coltypes import ColumnType, Kind, sqlite_type
from tributary.checker.errors import SourceError, UsageError
from tributary.checker.model import ChunkSum, Column, Shape, TableName, Where
from tributary.checker.source import KeyTerm, SelectingSource, display_url
from tributary.sql import SQLITE, quote, sqlite_name

log = logging.getLogger(__name__)

HIDDEN_SCHEMA = "tidb_binlog"  # the sink's checkpoint table is tidb_binlog__checkpoint
_RETRIABLE = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR}


def _error(what: str, e: sqlite3.Error) -> SourceError:
    code = getattr(e, "sqlite_errorcode", sqlite3.SQLITE_ERROR) & 0xFF
    return SourceError(f"{what}: {e}", retriable=code in _RETRIABLE)


def split_name(stored: str) -> TableName:
    schema, sep, table = stored.partition("__")
    return TableName(schema, table) if sep and schema and table else TableName("", stored)


class SqliteSource(SelectingSource):
    kind = "sqlite"
    placeholder = "?"
    pushdown = False
    database: str | None = None

    def __init__(self, db: aiosqlite.Connection, url: SplitResult) -> None:
        self._db = db
        self._url = url
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, url: SplitResult) -> SqliteSource:
        path = unquote(url.netloc + url.path)
        if not path or path == ":memory:":
            raise UsageError(f"SQLite URL {url.geturl()!r} names no file")
        file = Path(path)
        if not await asyncio.to_thread(file.is_file):
            raise SourceError(f"no SQLite file at {path}")
        uri = (await asyncio.to_thread(file.absolute)).as_uri() + "?mode=ro"
        try:
            db = await aiosqlite.connect(uri, uri=True)
        except sqlite3.Error as e:
            raise _error(f"cannot open {path}", e) from e
        try:
            await db.create_function("tributary_dec", 2, _dec_order, deterministic=True)
            await db.create_function("tributary_time", 1, _time_order, deterministic=True)
            await db.create_function("tributary_u64", 1, _u64_order, deterministic=True)
        except BaseException:
            await db.close()
            raise
        return cls(db, url)

    def display_url(self) -> str:
        return display_url(self._url)

    async def _query(self, sql: str, args: Sequence[object] = ()) -> list[tuple[object, ...]]:
        async with self._lock:
            try:
                return [tuple(r) for r in await self._db.execute_fetchall(sql, tuple(args))]
            except sqlite3.Error as e:
                raise _error(f"{self.display_url()}: query failed", e) from e

    async def tables(self, schema: str | None) -> list[TableName]:
        found = await self._query(
            "SELECT name FROM sqlite_master "
            "WHERE type = 'table' AND substr(name, 1, 7) != 'sqlite_'"
        )
        names = [split_name(str(n)) for (n,) in found]
        return sorted(
            n for n in names if n.schema != HIDDEN_SCHEMA and (schema is None or n.schema == schema)
        )

    def locate(self, name: TableName) -> str:
        return sqlite_name(name.schema, name.table)

    def quote(self, name: str) -> str:
        return quote(SQLITE, name)

    def _table(self, name: TableName) -> str:
        return self.quote(self.locate(name))

    async def shape(self, name: TableName) -> Shape:
        table = self.locate(name)
        info = await self._query("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)", (
            table,
        ))  # fmt: skip
        if not info:
            raise SourceError(f"{self.display_url()}: no table {table}")
        columns = tuple(
            Column(str(n), sqlite_type(str(t)), str(t), nullable=not nn) for n, t, nn, _ in info
        )
        primary = tuple(str(n) for n, _, _, pk in sorted(info, key=lambda r: int(str(r[3]))) if pk)
        not_null = {c.name for c in columns if not c.nullable}
        unique: list[tuple[str, ...]] = []
        for idx_name, is_unique, partial in await self._query(
            'SELECT name, "unique", partial FROM pragma_index_list(?)', (table,)
        ):
            if not is_unique or partial:
                continue
            cols = await self._query(
                "SELECT name FROM pragma_index_info(?) ORDER BY seqno", (idx_name,)
            )
            names = tuple(str(c) for (c,) in cols)
            if names and None not in names and not_null.issuperset(names):
                unique.append(names)
        if primary:
            unique = [u for u in unique if u != primary]  # the PRIMARY KEY's autoindex
        unique.sort(key=lambda cs: (len(cs), cs))
        return Shape(name, columns, primary, tuple(unique))

    def key_term(self, column: Column, value_type: ColumnType) -> KeyTerm:
        col = self.quote(column.name)
        t = value_type
        if t.kind is Kind.DECIMAL:
            return KeyTerm(
                f"tributary_dec({col}, {t.scale})", f"tributary_dec(?, {t.scale})", _text
            )
        if t.kind is Kind.TIME:
            return KeyTerm(f"tributary_time({col})", "tributary_time(?)", _same)
        if t.kind is Kind.INT and t.unsigned and t.bits == 64:
            return KeyTerm(f"tributary_u64({col})", "tributary_u64(?)", _text)
        return KeyTerm(col, "?", _fit_int64)

    async def checksum(self, name: TableName, columns: Sequence[Column], where: Where) -> ChunkSum:
        raise SourceError("SQLite sources have no pushed-down checksum")

    async def close(self) -> None:
        await self._db.close()


def _same(v: Canon) -> object:
    return v


def _text(v: Canon) -> object:
    return None if v is None else v.hex() if isinstance(v, bytes) else str(v)


def _fit_int64(v: Canon) -> object:
    """An integer past SQLite's int64 is stored (and so bound) as its decimal text."""
    if isinstance(v, int) and not -(1 << 63) <= v < (1 << 63):
        return str(v)
    return v


# Order-preserving forms. Worked example for DECIMAL scale 2: '9.00' -> 'P' + digits of 900
# zero-padded, '10.00' -> 'P' + ...1000, so '9.00' < '10.00' as text; '-1.50' -> 'N' + the
# nines' complement of 150, so every negative sorts before every positive and -2 < -1.
_WIDTH = 80  # digits: DECIMAL(65, 30) scaled to an integer fits


def _dec_order(v: object, scale: int) -> str | None:
    if v is None:
        return None
    try:
        n = int(Decimal(str(v.decode() if isinstance(v, bytes) else v)).scaleb(int(scale)))
    except (InvalidOperation, ValueError, OverflowError):
        return "X" + str(v)  # not a number: after every number, in text order
    if n < 0:
        return "N" + str(10**_WIDTH - 1 + n).zfill(_WIDTH)
    return "P" + str(n).zfill(_WIDTH)


def _time_order(v: object) -> int | str | None:
    text = canon(ColumnType(Kind.TIME, 6), v)
    if not isinstance(text, str):
        return None
    sign = -1 if text.startswith("-") else 1
    try:
        h, m, s = text.lstrip("-").split(":")
        return sign * ((int(h) * 3600 + int(m) * 60) * 1_000_000 + round(float(s) * 1_000_000))
    except ValueError:
        return "X" + text


def _u64_order(v: object) -> str | None:
    if v is None:
        return None
    try:
        return str(int(v.decode() if isinstance(v, bytes) else str(v))).zfill(20)
    except ValueError:
        return "X" + str(v)
