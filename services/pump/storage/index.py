"""The binlog index: an SQLite database (WAL) mapping ts -> value-log position, plus meta.

Table ``binlog``: ``ts`` (primary key) -> ``kind`` (binlog.BinlogType value),
``fid``, ``off``, ``size`` (the framed record), ``start_ts``. A prewrite is keyed
by its start_ts, a commit or fake binlog by its commit_ts; a plain rollback has
no row. Table ``meta``: ``gcTS``, ``maxCommitTS``, ``headPointer`` (end of the
last record indexed) and ``handlePointer`` (end of the last record the sorter
finished with); a pointer keeps its fid in ``value`` and its offset in ``extra``.

Invariants: each batch's rows and its ``headPointer`` commit in one
transaction, and write transactions never interleave: every write runs, whole, on
the storage's one write thread (the thread that appends to the value log, so the
group writer appends, syncs and indexes a batch in one hand-off,
:meth:`Index.put_batch_now`), so the index never holds half a batch. Reads go
through a second connection (aiosqlite) and only see committed transactions.
Durability of the index is not needed for safety (``synchronous=NORMAL``): whatever
a crash loses is re-indexed from the value log after ``min(headPointer,
handlePointer)``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import aiosqlite

from services.pump.storage.segment import Pointer

T = TypeVar("T")

IndexRow = tuple[int, int, int, int, int, int]  # ts, kind, fid, off, size, start_ts

_SCHEMA = """
CREATE TABLE IF NOT EXISTS binlog (
    ts INTEGER PRIMARY KEY, kind INTEGER NOT NULL, fid INTEGER NOT NULL,
    off INTEGER NOT NULL, size INTEGER NOT NULL, start_ts INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY, value INTEGER NOT NULL, extra INTEGER NOT NULL DEFAULT 0);
"""
_PUT = "INSERT OR REPLACE INTO binlog VALUES (?, ?, ?, ?, ?, ?)"
_META = "INSERT OR REPLACE INTO meta VALUES (?, ?, ?)"
_COMMITS = """
SELECT c.ts, c.kind, c.start_ts, c.fid, c.off, c.size, p.fid, p.off, p.size
FROM binlog AS c LEFT JOIN binlog AS p ON c.kind = 1 AND p.ts = c.start_ts AND p.kind = 0
WHERE c.ts > ? AND c.ts <= ? AND c.kind != 0
ORDER BY c.ts LIMIT ?
"""
_COUNT_COMMITS = "SELECT COUNT(*) FROM binlog WHERE ts > ? AND ts <= ? AND kind = 1"
_DELETE = "DELETE FROM binlog WHERE ts IN (SELECT ts FROM binlog WHERE ts <= ? ORDER BY ts LIMIT ?)"


@dataclass(frozen=True, slots=True)
class Meta:
    gc_ts: int = 0
    max_commit_ts: int = 0
    head: Pointer | None = None
    handle: Pointer | None = None


@dataclass(frozen=True, slots=True)
class CommitRow:
    """A commit or fake binlog to pull, with where its prewrite is (None if missing)."""

    ts: int
    kind: int
    start_ts: int
    where: tuple[int, int, int]
    prewrite: tuple[int, int, int] | None


class Index:
    """``writer`` is used only on ``write_pool`` (one thread); ``reader`` by aiosqlite."""

    def __init__(
        self, writer: sqlite3.Connection, reader: aiosqlite.Connection, write_pool: Executor
    ) -> None:
        self._w = writer
        self._r = reader
        self._pool = write_pool

    @classmethod
    async def open(cls, path: Path, write_pool: Executor) -> Index:
        """Open (creating) the index; ``write_pool`` must run one thread at a time."""
        loop = asyncio.get_running_loop()
        writer = await loop.run_in_executor(write_pool, _open_writer, path)
        try:
            reader = await aiosqlite.connect(path)
        except BaseException:
            await loop.run_in_executor(write_pool, writer.close)
            raise
        await reader.execute("PRAGMA query_only=ON")
        return cls(writer, reader, write_pool)

    async def _on_writer(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def close(self) -> None:
        try:
            await self._r.close()
        finally:
            await self._on_writer(self._w.close)

    async def meta(self) -> Meta:
        def read() -> list[tuple[str, int, int]]:
            return list(self._w.execute("SELECT key, value, extra FROM meta"))

        m = {str(k): (int(v), int(e)) for k, v, e in await self._on_writer(read)}

        def ptr(key: str) -> Pointer | None:
            return Pointer(*m[key]) if key in m else None

        return Meta(
            m.get("gcTS", (0, 0))[0],
            m.get("maxCommitTS", (0, 0))[0],
            ptr("headPointer"),
            ptr("handlePointer"),
        )

    def _transaction(self, *statements: tuple[str, Sequence[object]]) -> int:
        """Run ``statements`` in one transaction (on the write thread); rows changed by
        the last one. Rolled back on any error."""
        db, changed = self._w, 0
        try:
            for sql, args in statements:
                changed = db.execute(sql, args).rowcount
            db.commit()
        except BaseException:
            _rollback(db)
            raise
        return changed

    def put_batch_now(self, rows: Sequence[IndexRow], head: Pointer) -> None:
        """Rows and the new head pointer, in one transaction. Call on the write thread."""
        db = self._w
        try:
            db.executemany(_PUT, rows)
            db.execute(_META, ("headPointer", head.fid, head.offset))
            db.commit()
        except BaseException:
            _rollback(db)
            raise

    async def put_batch(self, rows: Sequence[IndexRow], head: Pointer) -> None:
        """:meth:`put_batch_now` on the write thread."""
        await self._on_writer(lambda: self.put_batch_now(rows, head))

    async def save_progress(self, max_commit_ts: int, handle: Pointer) -> None:
        await self._on_writer(
            lambda: self._transaction(
                (_META, ("maxCommitTS", max_commit_ts, 0)),
                (_META, ("handlePointer", handle.fid, handle.offset)),
            )
        )

    async def save_gc_ts(self, ts: int) -> None:
        await self._on_writer(lambda: self._transaction((_META, ("gcTS", ts, 0))))

    async def delete_upto(self, ts: int, limit: int) -> int:
        """Delete up to ``limit`` rows with ts <= ``ts`` in one transaction; how many went."""
        return await self._on_writer(lambda: self._transaction((_DELETE, (ts, limit))))

    async def commits(self, after: int, upto: int, limit: int) -> list[CommitRow]:
        rows = await self._r.execute_fetchall(_COMMITS, (after, upto, limit))
        return [
            CommitRow(ts, kind, start, (fid, off, size), None if pf is None else (pf, po, ps))
            for ts, kind, start, fid, off, size, pf, po, ps in rows
        ]

    async def count_commits(self, after: int, upto: int) -> int:
        """Commit rows (kind 1) with ``after < ts <= upto``: one per transaction; prewrites
        (kind 0) and fake binlogs (kind 2, start_ts == commit_ts) are not counted."""
        if upto <= after:
            return 0
        rows = list(await self._r.execute_fetchall(_COUNT_COMMITS, (after, upto)))
        return int(rows[0][0])

    async def lookup(self, ts: int) -> tuple[int, int, int] | None:
        rows = list(
            await self._r.execute_fetchall("SELECT fid, off, size FROM binlog WHERE ts = ?", (ts,))
        )
        return (int(rows[0][0]), int(rows[0][1]), int(rows[0][2])) if rows else None


def _open_writer(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False)  # used by the one write thread only
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        db.commit()
    except BaseException:
        db.close()
        raise
    return db


def _rollback(db: sqlite3.Connection) -> None:
    try:
        db.rollback()
    except sqlite3.Error:
        pass  # the original error is the one worth raising
