"""Which ``Source`` a URL names: one opener per scheme, from one small dict.

``mysql://user:password@host:port[/database][?time-zone=+00:00]`` (MySQL, MariaDB, TiDB) and
``sqlite://PATH`` (the SQLite sink's file: ``sqlite:///abs/x.db``, ``sqlite://rel.db``).
Invariant: this module sits above the port (``source``) and both sources; none of them imports
it, so a new database side is one entry here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import SplitResult, urlsplit

from tributary.checker.errors import UsageError
from tributary.checker.mysql_source import MysqlSource
from tributary.checker.source import Source, display_url
from tributary.checker.sqlite_source import SqliteSource

Opener = Callable[[SplitResult], Awaitable[Source]]

_OPENERS: dict[str, Opener] = {"mysql": MysqlSource.open, "sqlite": SqliteSource.open}


@asynccontextmanager
async def open_source(url: str) -> AsyncIterator[Source]:
    """The source ``url`` names, closed when the context ends; UsageError for a bad URL,
    SourceError when the database cannot be opened."""
    parts = urlsplit(url)
    opener = _OPENERS.get(parts.scheme.lower())
    if opener is None:
        raise UsageError(f"unsupported URL {display_url(parts)!r}: use mysql:// or sqlite://")
    source = await opener(parts)
    try:
        yield source
    finally:
        await source.close()
