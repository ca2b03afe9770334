"""The binlog index: an SQLite database (WAL) mapping ts -> value-log position, plus meta.

Table ``binlog``: ``ts`` (primary key) -> ``kind`` (binlog.BinlogType value),
``fid``, ``off``, ``size`` (the framed record), ``start_ts``. A prewrite is keyed
by its start_ts, a commit or fake binlog by its commit_ts; a plain rollback has
no row. Table ``meta``: ``gcTS``, ``maxCommitTS``, ``headPointer`` (end of the
last record indexed) and ``handlePointer`` (end of the last record the sorter
finished with); a pointer keeps its fid in ``value`` and its offset in ``extra``.

Invariants: each batch's rows and its ``headPointer`` commit in one
transaction, and write transactions never interleave (one lock), so the index
never holds half a batch. Reads go through a second connection and only see
committed transactions. Durability of the index is not needed for safety
(``synchronous=NORMAL``): whatever a crash loses is re-indexed from the value
log after ``min(headPointer, handlePointer)``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from services.pump.storage.segment import Pointer

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
    def __init__(self, writer: aiosqlite.Connection, reader: aiosqlite.Connection) -> None:
        self._w = writer
        self._r = reader
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path) -> Index:
        writer = await aiosqlite.connect(path)
        try:
            await writer.execute("PRAGMA journal_mode=WAL")
            await writer.execute("PRAGMA synchronous=NORMAL")
            await writer.executescript(_SCHEMA)
            await writer.commit()
            reader = await aiosqlite.connect(path)
        except BaseException:
            await writer.close()
            raise
        await reader.execute("PRAGMA query_only=ON")
        return cls(writer, reader)

    async def close(self) -> None:
        try:
            await self._r.close()
        finally:
            await self._w.close()

    async def meta(self) -> Meta:
        rows = await self._w.execute_fetchall("SELECT key, value, extra FROM meta")
        m = {str(k): (int(v), int(e)) for k, v, e in rows}

        def ptr(key: str) -> Pointer | None:
            return Pointer(*m[key]) if key in m else None

        return Meta(
            m.get("gcTS", (0, 0))[0],
            m.get("maxCommitTS", (0, 0))[0],
            ptr("headPointer"),
            ptr("handlePointer"),
        )

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            try:
                yield self._w
                await self._w.commit()
            except BaseException:
                await self._rollback()
                raise

    async def put_batch(self, rows: Sequence[IndexRow], head: Pointer) -> None:
        """Rows and the new head pointer, in one transaction."""
        async with self._transaction() as db:
            await db.executemany(_PUT, rows)
            await db.execute(_META, ("headPointer", head.fid, head.offset))

    async def save_progress(self, max_commit_ts: int, handle: Pointer) -> None:
        async with self._transaction() as db:
            await db.execute(_META, ("maxCommitTS", max_commit_ts, 0))
            await db.execute(_META, ("handlePointer", handle.fid, handle.offset))

    async def save_gc_ts(self, ts: int) -> None:
        async with self._transaction() as db:
            await db.execute(_META, ("gcTS", ts, 0))

    async def delete_upto(self, ts: int, limit: int) -> int:
        """Delete up to ``limit`` rows with ts <= ``ts`` in one transaction; how many went."""
        async with self._transaction() as db:
            cur = await db.execute(_DELETE, (ts, limit))
        return int(cur.rowcount)

    async def _rollback(self) -> None:
        try:
            await self._w.rollback()
        except sqlite3.Error:
            pass  # the original error is the one worth raising

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
