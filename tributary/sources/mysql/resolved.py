"""Resolved ts on an idle upstream: a ts below which no transaction can still appear.

A binlog reader that is caught up learns nothing from the binlog itself: no event, no ts, so a
checkpoint would stay at the last write and its lag would grow while nothing happens. With
``SourceConfig.resolve_idle`` the stream answers each binlog heartbeat (the server sends one
after ``heartbeat`` seconds with nothing to send, so the reader has everything) by asking the
upstream, on a connection of its own, for three figures, in this order:

1. its clock ``now`` (``UNIX_TIMESTAMP()``, whole seconds) and the start of its oldest running
   statement (``PROCESSLIST``: every thread that is not sleeping, a daemon, a binlog dump, a
   replica's I/O thread, or this query); ``oldest = now - TIME - 1`` (TIME is truncated);
2. the binlog end ``E`` (``SHOW MASTER STATUS``).

Why this bounds what is still to come: a transaction's ts comes from the time of the event that
ends it (``timestamps``), which is the start time of the statement that commits it. A
transaction that is not in the binlog up to ``E`` was, when (1) was read, either committing in a
statement that was running (its start >= ``oldest``) or not begun (its start >= ``now``): every
transaction after ``E`` gets a ts >= ``compose(min(now, oldest) * 1000, 0)``. So once the reader
has read up to ``E`` (its position, or the position a heartbeat reports), the resolved ts is

    R = compose(min(now, oldest) * 1000, 0) - 1

and the stream yields a checkpoint-only marker ``SourceTxn(Txn(R, R - 1), position,
resolved=True)`` when ``R`` is above the last ts it gave. It also takes ``R`` as that last ts,
so a reader resumed from ``(position, R)`` gives the next transactions the ts this one gives.
If anything was written between the heartbeat and (2), ``E`` is past the reader and the
snapshot is dropped: the next heartbeat tries again (a busy upstream moves the ts itself).

Worked example: the reader is at ``b.000001:900``, a heartbeat arrives; the upstream says now
= 1000 s, one statement running for 3 s (oldest = 1000 - 3 - 1 = 996), end ``b.000001:900``:
R = compose(996000, 0) - 1. The statement commits at 1003 s with event time 997 s: its ts
compose(997000, 0) > R. An idle upstream (no running statement) gives R = compose(now, 0) - 1.

Not covered: sessions that set ``@@timestamp`` into the past, and an upstream clock stepping
back, write event times below R; their transactions then take ts ``R + 1``, ``R + 2``, ... (the
``timestamps`` rule), still after the checkpoint, so nothing is lost or reordered.

Invariant: a marker's ts never exceeds the ts of any transaction yielded after it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from asyncmy.errors import Error as DriverError

from tributary.sources.mysql import server
from tributary.sources.mysql.config import SourceConfig
from tributary.sources.mysql.errors import SourceError
from tributary.sources.mysql.position import Position
from tributary.wire.ts import compose

log = logging.getLogger(__name__)

# Threads whose statements never end a transaction in this server's binlog.
_IDLE_COMMANDS = ("Sleep", "Daemon", "Binlog Dump", "Binlog Dump GTID", "Slave_IO")

_SNAPSHOT_SQL = (
    "SELECT UNIX_TIMESTAMP(), (SELECT MAX(TIME) FROM information_schema.PROCESSLIST"
    " WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ("
    + ", ".join(f"'{c}'" for c in _IDLE_COMMANDS)
    + "))"
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: int  # upstream clock, whole seconds
    running_for: int | None  # TIME of the oldest running statement, None when none runs
    end: Position  # the binlog end read after the clock

    @property
    def resolved_ts(self) -> int:
        """The highest ts no transaction after ``end`` can get (see the module docstring)."""
        floor = self.now if self.running_for is None else self.now - self.running_for - 1
        return compose(min(self.now, floor) * 1000, 0) - 1


def reached(at: Position, end: Position) -> bool:
    """Whether a reader at ``at`` has read everything up to ``end`` (binlog file names sort by
    their zero-padded number)."""
    return (at.file, at.pos) >= (end.file, end.pos)


class UpstreamClock:
    """The snapshot queries on one connection, opened on first use and reopened after a
    failure; a failure gives no snapshot (the stream carries on without a resolved ts)."""

    def __init__(self, cfg: SourceConfig) -> None:
        self._cfg = cfg
        self._conn: Any = None

    async def snapshot(self) -> Snapshot | None:
        try:
            if self._conn is None:
                self._conn = await server.open_connection(self._cfg)
            async with self._conn.cursor() as cur:
                await cur.execute(_SNAPSHOT_SQL)
                now, running = (await cur.fetchall())[0]
            end = await server.binlog_end(self._conn)
        except (DriverError, SourceError, OSError) as e:
            log.warning("no resolved ts from the upstream this time: %s", e)
            self.close()
            return None
        return Snapshot(int(now), None if running is None else int(running), end)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
