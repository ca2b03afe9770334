"""MySQL/MariaDB upstream through asyncmy: a pool of ``writers`` connections plus one for DDL.

Every connection runs in autocommit mode with explicit ``BEGIN``/``COMMIT``/``ROLLBACK``, the
session time zone UTC (TIMESTAMP values are written and read as UTC, as TiDB's binlog keeps
them) and a short lock wait timeout. Errors are classified by MySQL error number: deadlock
(1213), lock wait timeout (1205) and duplicate key (1062) are ``Conflict``; a lost or killed
connection (2006, 2013, 2055, 1927, or the socket failing) is ``ConnectionLost`` and the
connection is closed when its session is released; anything else is ``UpstreamError``.
Invariant: a connection goes back to the pool only with no transaction open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote, urlsplit

import asyncmy
import asyncmy.errors

from tributary.sql import MYSQL, Dialect, Statement
from tributary.workload.errors import Conflict, ConnectionLost, UpstreamError

log = logging.getLogger(__name__)

CONFLICTS = frozenset({1213, 1205, 1062})  # deadlock, lock wait timeout, duplicate entry
LOST = frozenset({2006, 2013, 2055, 1927, 4031})  # gone, lost, lost (SSL), killed, idle timeout
INIT = "SET time_zone = '+00:00', innodb_lock_wait_timeout = 10"


def _errno(e: BaseException) -> int:
    code = e.args[0] if e.args else 0
    return code if isinstance(code, int) else 0


def map_error(e: BaseException, doing: str) -> UpstreamError:
    code = _errno(e)
    message = f"upstream {doing}: {e!r}"
    if code in CONFLICTS:
        return Conflict(message)
    if code in LOST or isinstance(e, OSError | asyncmy.errors.InterfaceError | EOFError):
        return ConnectionLost(message)
    if isinstance(e, asyncmy.errors.OperationalError) and code >= 2000:  # client-side errors
        return ConnectionLost(message)
    return UpstreamError(message)


_DRIVER_ERRORS = (asyncmy.errors.MySQLError, OSError, EOFError, asyncio.IncompleteReadError)


class MysqlSession:
    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.broken = False
        self.in_txn = False

    @property
    def thread_id(self) -> int:
        """The server's id of this connection (what ``KILL`` takes)."""
        return int(self._conn.thread_id())

    async def _run(self, sql: str, args: tuple[Any, ...] | None, doing: str) -> tuple[int, Any]:
        try:
            async with self._conn.cursor() as cur:
                count = await cur.execute(sql, args)
                rows = await cur.fetchall() if cur.description else ()
                return int(count or 0), rows
        except _DRIVER_ERRORS as e:
            err = map_error(e, doing)
            if isinstance(err, ConnectionLost):
                self.broken = True
                self.in_txn = False
            raise err from e
        except asyncio.CancelledError:
            self.broken = True  # a reply may be half read: the connection is not reusable
            raise

    async def begin(self) -> None:
        await self._run("BEGIN", None, "BEGIN")
        self.in_txn = True

    async def commit(self) -> None:
        try:
            await self._run("COMMIT", None, "COMMIT")
        finally:
            self.in_txn = False

    async def rollback(self) -> None:
        if self.broken:
            return  # the server rolled it back when the connection went
        try:
            await self._run("ROLLBACK", None, "ROLLBACK")
        finally:
            self.in_txn = False

    async def query(self, stmt: Statement) -> list[tuple[Any, ...]]:
        _, rows = await self._run(stmt.sql, stmt.args, "query")
        return [tuple(r) for r in rows]

    async def execute(self, stmt: Statement) -> int:
        count, _ = await self._run(stmt.sql, stmt.args, "statement")
        return count


class MysqlUpstream:
    def __init__(self, params: dict[str, Any], writers: int) -> None:
        if writers < 1:
            raise ValueError("need at least one writer connection")
        self._params = params
        self._slots = asyncio.Semaphore(writers)
        self._idle: list[Any] = []
        self._ddl_lock = asyncio.Lock()
        self._ddl_conn: Any = None
        self._closed = False

    @property
    def dialect(self) -> Dialect:
        return MYSQL

    @classmethod
    async def connect(cls, url: str, *, writers: int = 8) -> MysqlUpstream:
        """``mysql://user:password@host:port[/database]``; checks that the server answers."""
        parts = urlsplit(url)
        params = {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or 3306,
            "user": unquote(parts.username or "root"),
            "password": unquote(parts.password or ""),
            "charset": "utf8mb4",
            "autocommit": True,
            "init_command": INIT,
        }
        upstream = cls(params, writers)
        async with upstream.session() as s:
            await s.query(Statement("SELECT 1"))
        return upstream

    async def _connect(self) -> Any:
        try:
            return await asyncmy.connect(**self._params)
        except _DRIVER_ERRORS as e:
            raise map_error(e, f"connect to {self._params['host']}:{self._params['port']}") from e

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[MysqlSession]:
        if self._closed:
            raise UpstreamError("upstream is closed")
        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._connect()
            session = MysqlSession(conn)
            try:
                yield session
            finally:
                if session.in_txn and not session.broken:
                    with contextlib.suppress(UpstreamError):
                        await session.rollback()
                if session.broken or session.in_txn or self._closed:
                    conn.close()
                else:
                    self._idle.append(conn)

    async def execute_ddl(self, schema: str, query: str) -> None:
        async with self._ddl_lock:
            if self._ddl_conn is None:
                self._ddl_conn = await self._connect()
            session = MysqlSession(self._ddl_conn)
            try:
                await session._run(query, None, "DDL")
            finally:
                if session.broken:
                    self._ddl_conn.close()
                    self._ddl_conn = None

    async def close(self) -> None:
        self._closed = True
        for conn in [*self._idle, self._ddl_conn]:
            if conn is not None:
                conn.close()
        self._idle.clear()
        self._ddl_conn = None
