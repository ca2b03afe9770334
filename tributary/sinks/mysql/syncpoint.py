"""The sync point store of a MySQL, MariaDB or TiDB downstream: TiCDC's ``tidb_cdc.syncpoint_v1``.

The table, created when the store opens if missing, is TiCDC's: the same columns, types, keys
and names, so TiCDC's tools and queries read it::

    ticdc_cluster_id varchar(255), changefeed varchar(255),
    primary_ts varchar(18), secondary_ts varchar(18),
    created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
    INDEX (created_at), PRIMARY KEY (changefeed, primary_ts)

``write`` puts one row per point in one transaction, as TiCDC's ``SinkSyncPoint``: ``INSERT
IGNORE`` (a point written again after a restart keeps its first row), ``primary_ts`` the
upstream commit ts, ``changefeed`` the changefeed's id and ``ticdc_cluster_id`` the capture
cluster's. ``secondary_ts`` is the downstream's own snapshot id at that moment:

* TiDB: ``@@tidb_current_ts`` read in the transaction, and ``SET GLOBAL tidb_external_ts`` to it
  in the same transaction, as TiCDC does (ignored when TiDB has no such variable, before 6.4:
  error 1193), so reads with ``tidb_enable_external_ts_read`` see the consistent snapshot;
* MySQL and MariaDB have no TSO and no read at a past snapshot: ``secondary_ts`` is ``'0'`` (a
  string of digits still, for tools that parse it as a TSO). The row itself marks the moment:
  its ``created_at``, and its INSERT in the downstream's binlog (the GTID of that transaction
  is the downstream's position at the sync point).

The same transaction deletes the changefeed's rows older than the retention (``created_at <
NOW() - INTERVAL retention SECOND``, the server's clock, as TiCDC). TiCDC does that at most once
per retention period; here every write does it, so a row lives at most retention plus one
interval. Rows of other changefeeds and clusters are left alone.

A driver error drops the connection (the server rolls the transaction back) and leaves as a
SinkError, retriable by its code (``conn.is_retriable``); the next write reconnects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from tributary.sinks.mysql.conn import (
    DRIVER_ERRORS,
    ConnectParams,
    Gate,
    Session,
    connect,
    error_code,
    sink_error,
)
from tributary.sinks.port import WriteGate, WriteRefused

log = logging.getLogger(__name__)

SCHEMA = "tidb_cdc"  # TiCDC's system schema
TABLE = "syncpoint_v1"
CREATE_SCHEMA = f"CREATE DATABASE IF NOT EXISTS {SCHEMA}"
CREATE_TABLE = f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.{TABLE} (
    ticdc_cluster_id varchar(255),
    changefeed varchar(255),
    primary_ts varchar(18),
    secondary_ts varchar(18),
    created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
    INDEX (created_at),
    PRIMARY KEY (changefeed, primary_ts)
)"""
_INSERT = (
    f"INSERT IGNORE INTO {SCHEMA}.{TABLE} "
    "(ticdc_cluster_id, changefeed, primary_ts, secondary_ts) VALUES "
)
_EXPIRE = (
    f"DELETE FROM {SCHEMA}.{TABLE} WHERE ticdc_cluster_id = %s AND changefeed = %s"
    " AND created_at < (NOW() - INTERVAL %s SECOND)"
)
UNKNOWN_SYSTEM_VARIABLE = 1193  # TiDB before 6.4 has no tidb_external_ts
NO_SNAPSHOT_ID = "0"  # secondary_ts of a MySQL or MariaDB downstream


class MysqlSyncPointStore:
    def __init__(
        self, params: ConnectParams, cluster_id: str, changefeed: str, retention: float
    ) -> None:
        self._params = params
        self._cluster = cluster_id
        self._changefeed = changefeed
        self._retention = retention
        self._gate = Gate()
        self._session: Session | None = None
        self.tidb = False  # the downstream is TiDB: it has a TSO

    @property
    def write_gate(self) -> WriteGate | None:
        return self._gate.check

    @write_gate.setter
    def write_gate(self, gate: WriteGate | None) -> None:
        self._gate.check = gate

    @classmethod
    async def open(
        cls, params: ConnectParams, cluster_id: str, changefeed: str, retention: float
    ) -> MysqlSyncPointStore:
        store = cls(params, cluster_id, changefeed, retention)
        try:
            session = await store._connect()
            store.tidb = session.tidb
            await session.execute(CREATE_SCHEMA)
            await session.execute(CREATE_TABLE)
        except DRIVER_ERRORS as e:
            store._drop()
            raise sink_error(f"creating {SCHEMA}.{TABLE}", e) from e
        return store

    async def _connect(self) -> Session:
        if self._session is None:
            self._session = await connect(self._params, gate=self._gate)
        return self._session

    def _drop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    async def write(self, points: Sequence[int]) -> None:
        if not points:
            return
        try:
            session = await self._connect()
            session.allow_write()
            await session.begin()
            secondary = await self._snapshot_id(session)
            rows = [(self._cluster, self._changefeed, str(p), secondary) for p in points]
            values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
            await session.execute(_INSERT + values, [v for row in rows for v in row])
            await session.execute(_EXPIRE, (self._cluster, self._changefeed, self._retention))
            session.allow_write()  # nothing awaited between this and sending COMMIT
            await session.commit()
        except (asyncio.CancelledError, WriteRefused):
            self._drop()  # mid-transaction: the server rolls back what is open
            raise
        except DRIVER_ERRORS as e:
            self._drop()
            raise sink_error(f"writing sync points {points[0]}..{points[-1]}", e) from e
        log.info(
            "changefeed %s: sync point%s %s written (secondary ts %s)",
            self._changefeed,
            "s" if len(points) > 1 else "",
            ", ".join(map(str, points)),
            secondary,
        )

    async def _snapshot_id(self, session: Session) -> str:
        """The downstream's snapshot id in the open transaction (the module's doc)."""
        if not self.tidb:
            return NO_SNAPSHOT_ID
        [(current,)] = await session.query("SELECT @@tidb_current_ts")
        secondary = str(int(current))
        try:
            await session.execute(f"SET GLOBAL tidb_external_ts = {secondary}")
        except DRIVER_ERRORS as e:
            if error_code(e) != UNKNOWN_SYSTEM_VARIABLE:
                raise
            log.warning("the downstream has no tidb_external_ts (TiDB before 6.4): %s", e)
        return secondary

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.quit()
