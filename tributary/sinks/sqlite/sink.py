"""The SQLite sink (aiosqlite): the embedded default downstream.

Layout: one database file; upstream ``schema.table`` is the table ``"schema__table"`` (one file
keeps a batch and its checkpoint in one atomic transaction, which attached databases in WAL mode
would not); the checkpoint is the row of ``"tidb_binlog__checkpoint"`` keyed by the upstream
cluster ID, holding tidb-binlog's checkpoint JSON.

Invariant: a batch of transactions and the checkpoint move together. Each ``apply`` runs in one
``BEGIN IMMEDIATE`` ... ``COMMIT`` (SQLite DDL is transactional too), so after any crash the file
holds exactly the transactions up to its checkpoint. Transactions at or below the checkpoint are
skipped, so a replay from an older position is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from urllib.parse import SplitResult

import aiosqlite

from tributary.change import RowChange, SqlValue, Txn
from tributary.sinks.checkpoint import (
    CheckpointRecord,
    checkpoint_load,
    checkpoint_save,
    checkpoint_setup,
)
from tributary.sinks.port import SinkError, SinkOptions, UnsupportedDdl, pending
from tributary.sinks.sqlite.ddl import DropColumn, DropSchema, Step, translate
from tributary.sinks.urls import refuse_unknown_options
from tributary.sql import SQLITE, Statement, quote, row_statements, sqlite_name

log = logging.getLogger(__name__)

CHECKPOINT_TABLE = sqlite_name("tidb_binlog", "checkpoint")
# Primary result codes worth a retry: busy/locked by another connection, I/O trouble, disk full.
_RETRIABLE = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL}
_INT64 = 1 << 63


def _value(v: SqlValue) -> SqlValue:
    """What sqlite3 can bind: Decimal as its text, integers past int64 as their decimal text."""
    if isinstance(v, Decimal) or (isinstance(v, int) and not -_INT64 <= v < _INT64):
        return str(v)
    return v


def _error(what: str, e: sqlite3.Error) -> SinkError:
    code = getattr(e, "sqlite_errorcode", sqlite3.SQLITE_ERROR) & 0xFF
    return SinkError(f"sqlite sink: {what}: {e}", retriable=code in _RETRIABLE)


class SqliteSink:
    """Applies batches into one SQLite file; ``safe_mode`` may be switched between batches."""

    def __init__(
        self,
        db: aiosqlite.Connection,
        cluster_id: int,
        saved: CheckpointRecord | None,
        safe_mode: bool,
    ) -> None:
        self._db = db
        self._cluster_id = cluster_id
        self._saved = saved
        self._lock = asyncio.Lock()
        self._closed = False
        self.safe_mode = safe_mode

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        cluster_id: int,
        safe_mode: bool = False,
        busy_timeout_ms: int = 5000,
    ) -> SqliteSink:
        """Open (creating if needed) the file; ``busy_timeout_ms``: how long a batch waits for a
        lock held by another connection before failing with a retriable SinkError."""
        try:
            db = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as e:
            raise _error(f"cannot open {path}", e) from e
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            await db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            for sql in checkpoint_setup(SQLITE):
                await db.execute(sql)
            load = checkpoint_load(SQLITE, cluster_id)
            rows = list(await db.execute_fetchall(load.sql, load.args))
            saved = CheckpointRecord.from_json(str(rows[0][0])) if rows else None
        except BaseException as e:
            await db.close()
            if isinstance(e, sqlite3.Error):
                raise _error(f"cannot open {path}", e) from e
            raise
        log.info("sqlite sink %s opened at checkpoint %s", path, saved and saved.commit_ts)
        return cls(db, cluster_id, saved, safe_mode)

    async def __aenter__(self) -> SqliteSink:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def checkpoint(self) -> int | None:
        return self._saved.commit_ts if self._saved else None

    async def apply(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            if self._closed:
                raise SinkError("sqlite sink is closed")
            todo = pending(txns, await self.checkpoint())
            if not todo:
                return
            version = max(
                [t.schema_version for t in todo]
                + [self._saved.schema_version if self._saved else 0]
            )
            record = CheckpointRecord(todo[-1].commit_ts, consistent=True, schema_version=version)
            try:
                await self._db.execute("BEGIN IMMEDIATE")
                try:
                    for txn in todo:
                        await self._apply_txn(txn)
                    save = checkpoint_save(SQLITE, self._cluster_id, record.to_json())
                    await self._db.execute(save.sql, save.args)
                    await self._db.execute("COMMIT")
                except BaseException:
                    await self._rollback()
                    raise
            except sqlite3.Error as e:
                raise _error(f"batch up to commit ts {record.commit_ts} failed", e) from e
            self._saved = record

    async def _rollback(self) -> None:
        try:
            await self._db.execute("ROLLBACK")
        except sqlite3.Error:
            log.exception("sqlite sink: rollback failed")

    async def _apply_txn(self, txn: Txn) -> None:
        """One transaction's statements; errors name its commit ts."""
        try:
            if txn.ddl is not None:
                for step in translate(txn.ddl):
                    await self._step(step)
            else:
                await self._rows(txn.rows)
        except sqlite3.Error as e:
            raise _error(f"transaction at commit ts {txn.commit_ts} failed", e) from e
        except UnsupportedDdl as e:
            raise UnsupportedDdl(f"DDL at commit ts {txn.commit_ts}: {e}") from e

    async def _rows(self, rows: Sequence[RowChange]) -> None:
        """Consecutive statements with the same text go to one ``executemany``."""
        run: list[Statement] = []
        for change in rows:
            for stmt in row_statements(SQLITE, change, safe=self.safe_mode):
                if run and run[0].sql != stmt.sql:
                    await self._flush(run)
                    run = []
                run.append(stmt)
        if run:
            await self._flush(run)

    async def _flush(self, run: list[Statement]) -> None:
        params = [tuple(_value(v) for v in s.args) for s in run]
        if len(run) == 1:
            await self._db.execute(run[0].sql, params[0])
        else:
            await self._db.executemany(run[0].sql, params)

    async def _step(self, step: Step) -> None:
        if isinstance(step, str):
            await self._db.execute(step)
        elif isinstance(step, DropSchema):
            prefix = sqlite_name(step.schema, "")
            found = await self._db.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?) = ?",
                (len(prefix), prefix),
            )
            for (name,) in found:
                if name != CHECKPOINT_TABLE:
                    await self._db.execute(f"DROP TABLE {quote(SQLITE, str(name))}")
        elif isinstance(step, DropColumn):
            indexes = await self._db.execute_fetchall(
                "SELECT l.name FROM pragma_index_list(?) AS l, pragma_index_info(l.name) AS i "
                "WHERE l.origin = 'c' AND i.name = ?",
                (step.table, step.column),
            )
            for (name,) in indexes:
                await self._db.execute(f"DROP INDEX {quote(SQLITE, str(name))}")
            await self._db.execute(
                f"ALTER TABLE {quote(SQLITE, step.table)} DROP COLUMN {quote(SQLITE, step.column)}"
            )

    async def close(self) -> None:
        async with self._lock:
            if not self._closed:
                self._closed = True
                await self._db.close()


async def open_url(url: SplitResult, options: SinkOptions) -> SqliteSink:
    """The ``sqlite://PATH`` opener for ``sinks.schemes``."""
    path = url.netloc + url.path
    if not path:
        raise SinkError(f"sqlite sink URL has no path: {url.geturl()!r}")
    refuse_unknown_options("sqlite", url, ())
    return await SqliteSink.open(path, cluster_id=options.cluster_id, safe_mode=options.safe_mode)
