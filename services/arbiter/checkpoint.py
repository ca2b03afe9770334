"""``tidb_binlog.arbiter_checkpoint``: tidb-binlog's arbiter table, plus the Kafka offset.

One row per topic: ``topic_name VARCHAR(255) PRIMARY KEY, ts BIGINT NOT NULL, status INT NOT NULL``
as tidb-binlog's, and ours ``kafka_offset BIGINT NOT NULL DEFAULT -1``, the offset of the next
message to read (-1: unknown, found again from ``ts``). ``status`` 0 means the arbiter stopped
cleanly and everything up to ``ts`` is applied; 1 that it is running or died, so the next start
runs in safe mode for its first minutes (tidb-binlog's rule). On SQLite the table is
``tidb_binlog__arbiter_checkpoint`` in the downstream file.

Invariant: the row is a resume hint that never runs ahead of the downstream. It is written after
the sink applied a batch (the sink's own checkpoint, in the same downstream transaction as the
rows, is what says which commit ts are applied), so after a crash the offset may be behind and
the arbiter re-reads a few messages that the sink drops by commit ts, never one it skips.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import aiosqlite

from tributary.sinks import SinkOptions
from tributary.sinks.mysql.config import parse_url
from tributary.sinks.mysql.conn import DRIVER_ERRORS, Session, connect
from tributary.sinks.mysql.conn import sink_error as mysql_error
from tributary.sql import MYSQL, SQLITE, Dialect, table_name

log = logging.getLogger(__name__)

SCHEMA = "tidb_binlog"
TABLE = "arbiter_checkpoint"
STATUS_NORMAL = 0  # stopped cleanly: everything <= ts is applied
STATUS_RUNNING = 1  # running, or died: safe mode at the next start


@dataclass(frozen=True, slots=True)
class ArbiterCheckpoint:
    ts: int
    status: int
    offset: int = -1  # the next message to read; -1 = unknown


class CheckpointStore(Protocol):
    async def load(self) -> ArbiterCheckpoint | None: ...

    async def save(self, cp: ArbiterCheckpoint) -> None: ...

    async def close(self) -> None: ...


def _create(d: Dialect) -> str:
    name = table_name(d, SCHEMA, TABLE, params=False)
    return (
        f"CREATE TABLE IF NOT EXISTS {name}(topic_name VARCHAR(255) PRIMARY KEY, "
        "ts BIGINT NOT NULL, status INT NOT NULL, kafka_offset BIGINT NOT NULL DEFAULT -1)"
    )


def _save(d: Dialect) -> str:
    p = d.placeholder
    return (
        f"REPLACE INTO {table_name(d, SCHEMA, TABLE)}(topic_name, ts, status, kafka_offset) "
        f"VALUES ({p},{p},{p},{p})"
    )


def _load(d: Dialect) -> str:
    return (
        f"SELECT ts, status, kafka_offset FROM {table_name(d, SCHEMA, TABLE)} "
        f"WHERE topic_name = {d.placeholder}"
    )


class MysqlCheckpointStore:
    """The row on a MySQL/MariaDB/TiDB downstream, over a connection of its own."""

    def __init__(self, session: Session, topic: str) -> None:
        self._session = session
        self._topic = topic

    @classmethod
    async def open(cls, url: str, topic: str) -> MysqlCheckpointStore:
        params = parse_url(urlsplit(url), SinkOptions(cluster_id=0)).connect
        try:
            session = await connect(params)
            await session.execute(f"CREATE DATABASE IF NOT EXISTS `{SCHEMA}`")
            await session.execute(_create(MYSQL))
            # a table tidb-binlog's arbiter made has no kafka_offset column yet
            rows = await session.query(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s AND column_name = 'kafka_offset'",
                (SCHEMA, TABLE),
            )
            if not rows:
                await session.execute(
                    f"ALTER TABLE `{SCHEMA}`.`{TABLE}` "
                    "ADD COLUMN kafka_offset BIGINT NOT NULL DEFAULT -1"
                )
        except DRIVER_ERRORS as e:
            raise mysql_error(
                "arbiter checkpoint: cannot open tidb_binlog.arbiter_checkpoint", e
            ) from e
        return cls(session, topic)

    async def load(self) -> ArbiterCheckpoint | None:
        try:
            rows = await self._session.query(_load(MYSQL), (self._topic,))
        except DRIVER_ERRORS as e:
            raise mysql_error("arbiter checkpoint: cannot read", e) from e
        return (
            ArbiterCheckpoint(int(rows[0][0]), int(rows[0][1]), int(rows[0][2])) if rows else None
        )

    async def save(self, cp: ArbiterCheckpoint) -> None:
        try:
            await self._session.execute(_save(MYSQL), (self._topic, cp.ts, cp.status, cp.offset))
        except DRIVER_ERRORS as e:
            raise mysql_error(f"arbiter checkpoint: cannot save ts {cp.ts}", e) from e

    async def close(self) -> None:
        await self._session.quit()


class SqliteCheckpointStore:
    """The row in the SQLite downstream file."""

    def __init__(self, db: aiosqlite.Connection, topic: str) -> None:
        self._db = db
        self._topic = topic

    @classmethod
    async def open(cls, path: str, topic: str) -> SqliteCheckpointStore:
        db = await aiosqlite.connect(path, timeout=30.0)
        try:
            await db.execute(_create(SQLITE))
            await db.commit()
        except BaseException:
            await db.close()
            raise
        return cls(db, topic)

    async def load(self) -> ArbiterCheckpoint | None:
        async with self._db.execute(_load(SQLITE), (self._topic,)) as cur:
            row = await cur.fetchone()
        return ArbiterCheckpoint(int(row[0]), int(row[1]), int(row[2])) if row else None

    async def save(self, cp: ArbiterCheckpoint) -> None:
        await self._db.execute(_save(SQLITE), (self._topic, cp.ts, cp.status, cp.offset))
        await self._db.commit()

    async def close(self) -> None:
        await self._db.close()


class NoCheckpointStore:
    """Downstreams without tables (print://, blackhole://): resume from the sink's commit ts."""

    async def load(self) -> ArbiterCheckpoint | None:
        return None

    async def save(self, cp: ArbiterCheckpoint) -> None:
        return None

    async def close(self) -> None:
        return None


async def open_store(sink_url: str, topic: str) -> CheckpointStore:
    parts = urlsplit(sink_url)
    scheme = parts.scheme.lower()
    if scheme == "mysql":
        return await MysqlCheckpointStore.open(sink_url, topic)
    if scheme == "sqlite":
        return await SqliteCheckpointStore.open(sink_url.removeprefix(f"{parts.scheme}://"), topic)
    log.warning("downstream %s:// has no arbiter_checkpoint table: resuming by commit ts", scheme)
    return NoCheckpointStore()
