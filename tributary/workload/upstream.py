"""The upstream database port: sessions that run one transaction at a time, plus DDL.

Two adapters implement it: ``upstream_mysql.MysqlUpstream`` (MySQL/MariaDB through asyncmy, a
pool of connections) and ``upstream_sqlite.SqliteUpstream`` (one SQLite file through aiosqlite,
writers serialized). Statements are ``sql.Statement`` values built by :mod:`workload.rows`
for the adapter's ``dialect``; DDL is given as MySQL text (what TiDB would write in the binlog)
and each adapter runs its own form of it. Adapters map every driver error to
:mod:`workload.errors` (``Conflict``, ``ConnectionLost``, ``UpstreamError``).

Contract: after ``rollback()`` (or a failed ``commit()``) the session holds no transaction and
no locks; a session whose connection broke is discarded when it is released.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol
from urllib.parse import urlsplit

from tributary.sql import Dialect, Statement


class Session(Protocol):
    async def begin(self) -> None: ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...

    async def query(self, stmt: Statement) -> list[tuple[Any, ...]]: ...

    async def execute(self, stmt: Statement) -> int:
        """Run one statement; the number of rows it changed."""
        ...


class Upstream(Protocol):
    @property
    def dialect(self) -> Dialect: ...

    def session(self) -> contextlib.AbstractAsyncContextManager[Session]: ...

    async def execute_ddl(self, schema: str, query: str) -> None:
        """Run a DDL given as MySQL text (``schema`` is the database it runs in)."""
        ...

    async def close(self) -> None: ...


@contextlib.asynccontextmanager
async def open_upstream(url: str, *, writers: int = 8) -> AsyncIterator[Upstream]:
    """``mysql://user:pw@host:port`` or ``sqlite:///path/to/file.db``."""
    scheme = urlsplit(url).scheme
    if scheme == "mysql":
        from tributary.workload.upstream_mysql import MysqlUpstream

        upstream: Upstream = await MysqlUpstream.connect(url, writers=writers)
    elif scheme == "sqlite":
        from tributary.workload.upstream_sqlite import SqliteUpstream

        upstream = await SqliteUpstream.open(url.removeprefix("sqlite://"))
    else:
        raise ValueError(f"upstream URL {url!r}: want mysql://... or sqlite:///path")
    try:
        yield upstream
    finally:
        await upstream.close()
