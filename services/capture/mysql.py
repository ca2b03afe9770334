"""``ChangeSource`` over a MySQL/MariaDB row binlog (the ``mysqlsource`` package).

The upstream is a URL (``mysql://user:pw@host:port/?server-id=N``); position tokens are
``mysqlsource.Position`` strings (``file:pos`` or ``file:pos@gtid``). Every ``SourceError``
leaves as a ``SourceFailure`` with the same ``retriable``. The reader asks for a heartbeat every
``HEARTBEAT`` seconds and for resolved-ts markers (``mysqlsource.resolved``), so an idle
changefeed's checkpoint keeps up with the upstream's clock.

Every reader needs its own replica server id (the upstream drops a dump connection when
another one registers with the same id): each ``open`` takes the URL's ``server-id`` plus an
offset drawn from ``reader`` (the capture id) and a counter, so the processors of several
changefeeds and several captures never share one.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.capture.source import SourceFailure, SourceItem
from tributary.change import TableFilter
from tributary.sources import mysql as mysqlsource

HEARTBEAT = 1.0  # seconds: how soon an idle changefeed's checkpoint moves (resolved ts)


class MysqlChangeSource:
    def __init__(self, uri: str, reader: str = "") -> None:
        try:
            self._cfg = mysqlsource.SourceConfig.from_uri(uri)
        except ValueError as e:
            raise SourceFailure(f"bad upstream URL: {e}", retriable=False) from e
        self._salt = (zlib.crc32(reader.encode()) % 65536) * 4096 if reader else 0
        self._opens = itertools.count()

    def _server_id(self) -> int:
        offset = self._salt + next(self._opens) % 4096 if self._salt else 0
        return (self._cfg.server_id - 1 + offset) % 0xFFFFFFFF + 1

    async def tables(self, table_filter: TableFilter | None) -> list[tuple[str, str]]:
        cfg = dataclasses.replace(self._cfg, filter=table_filter)
        try:
            return await mysqlsource.list_tables(cfg)
        except mysqlsource.SourceError as e:
            raise SourceFailure(f"upstream: {e}", retriable=e.retriable) from e

    def reached(self, position: str, end: str) -> bool:
        at, until = mysqlsource.Position.parse(position), mysqlsource.Position.parse(end)
        return (at.file, at.pos) >= (until.file, until.pos)

    @property
    def upstream_id(self) -> int:
        """A stable id of the upstream server (TiCDC's ``upstream-id``)."""
        return zlib.crc32(f"{self._cfg.host}:{self._cfg.port}".encode())

    async def current_position(self) -> str:
        try:
            return str(await mysqlsource.current_position(self._cfg))
        except mysqlsource.SourceError as e:
            raise SourceFailure(f"upstream: {e}", retriable=e.retriable) from e

    @asynccontextmanager
    async def open(
        self, start: str, last_ts: int, table_filter: TableFilter | None
    ) -> AsyncIterator[AsyncIterator[SourceItem]]:
        try:
            position = mysqlsource.Position.parse(start)
        except ValueError as e:
            raise SourceFailure(f"bad source position {start!r}: {e}", retriable=False) from e
        cfg = dataclasses.replace(
            self._cfg,
            filter=table_filter,
            heartbeat=HEARTBEAT,
            resolve_idle=True,
            server_id=self._server_id(),
        )
        try:
            async with mysqlsource.open_source(cfg, position, last_ts) as stream:
                yield _items(stream)
        except mysqlsource.SourceError as e:
            raise SourceFailure(f"upstream: {e}", retriable=e.retriable) from e


async def _items(stream: AsyncIterator[mysqlsource.SourceTxn]) -> AsyncIterator[SourceItem]:
    try:
        async for item in stream:
            yield SourceItem(item.txn, str(item.position), item.resolved)
    except mysqlsource.SourceError as e:
        raise SourceFailure(f"upstream: {e}", retriable=e.retriable) from e
