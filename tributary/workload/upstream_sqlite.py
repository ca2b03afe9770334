"""SQLite upstream through aiosqlite (the demo's embedded upstream).

SQLite has no databases: upstream ``db.table`` is the table ``db__table`` (as the SQLite sink
names it). One connection serves every session, one transaction at a time (an asyncio lock held
from ``begin`` to commit/rollback), each opened with ``BEGIN IMMEDIATE`` so another process
writing the same file waits too; a locking read is a plain SELECT inside it. DDL arrives as
MySQL text and runs as the SQLite sink would run it (``sinks.sqlite.ddl.translate``), so the
upstream file has exactly the tables a SQLite downstream gets. Values are stored in the form
the drainer's translator sends downstream (:func:`sinks.pump.values.stored`).
Result codes: BUSY/LOCKED and duplicate keys are ``Conflict``; others ``UpstreamError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosqlite

from tributary.change import Ddl
from tributary.sinks.sqlite.ddl import DropColumn, DropSchema, translate
from tributary.sql import SQLITE, Dialect, Statement, quote, sqlite_name
from tributary.workload.errors import Conflict, UpstreamError

log = logging.getLogger(__name__)

_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}  # primary result codes
_DUPLICATE = {sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY}  # extended


def map_error(e: sqlite3.Error, doing: str) -> UpstreamError:
    code = getattr(e, "sqlite_errorcode", sqlite3.SQLITE_ERROR)
    message = f"upstream {doing}: {e!r}"
    conflict = code & 0xFF in _BUSY or code in _DUPLICATE
    return Conflict(message) if conflict else UpstreamError(message)


class SqliteSession:
    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self.in_txn = False

    async def _run(self, sql: str, args: tuple[Any, ...], doing: str) -> aiosqlite.Cursor:
        try:
            return await self._db.execute(sql, args)
        except sqlite3.Error as e:
            raise map_error(e, doing) from e

    async def begin(self) -> None:
        await self._run("BEGIN IMMEDIATE", (), "BEGIN")
        self.in_txn = True

    async def commit(self) -> None:
        try:
            await self._run("COMMIT", (), "COMMIT")
        except UpstreamError:
            await self.rollback()
            raise
        self.in_txn = False

    async def rollback(self) -> None:
        if self.in_txn:
            self.in_txn = False
            with contextlib.suppress(sqlite3.Error):
                await self._db.execute("ROLLBACK")

    async def query(self, stmt: Statement) -> list[tuple[Any, ...]]:
        cur = await self._run(stmt.sql, stmt.args, "query")
        return [tuple(r) for r in await cur.fetchall()]

    async def execute(self, stmt: Statement) -> int:
        cur = await self._run(stmt.sql, stmt.args, "statement")
        return cur.rowcount


class SqliteUpstream:
    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._lock = asyncio.Lock()

    @property
    def dialect(self) -> Dialect:
        return SQLITE

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_ms: int = 30_000) -> SqliteUpstream:
        db = await aiosqlite.connect(path, isolation_level=None)
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        except BaseException:
            await db.close()
            raise
        return cls(db)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[SqliteSession]:
        async with self._lock:
            session = SqliteSession(self._db)
            try:
                yield session
            finally:
                await session.rollback()

    async def execute_ddl(self, schema: str, query: str) -> None:
        async with self._lock:
            try:
                for step in translate(Ddl(schema, query)):
                    await self._step(step)
            except sqlite3.Error as e:
                raise map_error(e, f"DDL {query!r}") from e

    async def _step(self, step: str | DropSchema | DropColumn) -> None:
        if isinstance(step, str):
            await self._db.execute(step)
        elif isinstance(step, DropSchema):
            prefix = sqlite_name(step.schema, "")
            found = await self._db.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?) = ?",
                (len(prefix), prefix),
            )
            for (name,) in found:
                await self._db.execute(f"DROP TABLE {quote(SQLITE, str(name), params=False)}")
        else:
            indexes = await self._db.execute_fetchall(
                "SELECT l.name FROM pragma_index_list(?) AS l, pragma_index_info(l.name) AS i "
                "WHERE l.origin = 'c' AND i.name = ?",
                (step.table, step.column),
            )
            for (name,) in indexes:
                await self._db.execute(f"DROP INDEX {quote(SQLITE, str(name), params=False)}")
            table, column = (quote(SQLITE, n, params=False) for n in (step.table, step.column))
            await self._db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")

    async def close(self) -> None:
        await self._db.close()
