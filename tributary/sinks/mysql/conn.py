"""Connections to a MySQL/MariaDB downstream (asyncmy) and what its errors mean.

Every connection is set up the same way: utf8mb4, the configured session ``time_zone`` (the
zone TIMESTAMP values arrive formatted in), ``NO_BACKSLASH_ESCAPES`` cleared from the session
``sql_mode`` (the driver escapes with backslashes), ``foreign_key_checks=0`` (the upstream
checked them; the sink reorders across tables), bytes sent as ``_binary'...'`` literals; on
TiDB also the session variables of ``sinks.mysql.tidb`` (optimistic transactions ...).

Errors are classified by MySQL error code, never by message text: lost or refused connections,
deadlocks, lock wait timeouts, a server shutting down or read-only, TiDB's write conflicts
and timeouts are worth a reconnect and a retry (``is_retriable``); a transaction TiDB refuses
for its size is ``TOO_LARGE_CODES``, split by the caller; the "already exists / does not
exist" codes of a replayed DDL are ignored as tidb-binlog's loader ignores them
(``IGNORABLE_DDL_CODES``).

Invariant: a connection that saw a retriable error, or whose task was cancelled mid-statement,
is never used again: ``Downstream.drop`` closes it and the next ``get`` opens a fresh one.
Every statement has a reply deadline (``Session``). The rest of the sink sees ``Session``s,
never the driver.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncmy
from asyncmy.connection import Connection
from asyncmy.errors import InterfaceError, MySQLError

from tributary.change import SqlValue
from tributary.sinks.mysql import tidb
from tributary.sinks.port import SinkError, WriteGate
from tributary.sql import Statement

log = logging.getLogger(__name__)

RETRIABLE_CODES = (
    frozenset(
        {
            1040,  # too many connections
            1053,  # server shutdown in progress
            1158,  # network read error
            1159,  # network read timeout
            1160,  # network write error
            1161,  # network write timeout
            1205,  # lock wait timeout
            1213,  # deadlock
            1290,  # --read-only (a failover in progress)
            1927,  # connection killed (MariaDB, e.g. at shutdown)
            2003,  # cannot connect
            2006,  # server has gone away
            2013,  # lost connection during query
            2055,  # lost connection at a system call
        }
    )
    | tidb.RETRIABLE_CODES
)
# A lock conflict with another transaction: only the transaction (1213, TiDB's write conflicts)
# or the statement (1205) was rolled back; the connection is fine and the transaction may simply
# run again.
LOCK_CODES = frozenset({1205, 1213}) | tidb.CONFLICT_CODES
# The transaction is too large for the downstream (TiDB's txn-total-size-limit): smaller ones
# are not. Not retriable as it is.
TOO_LARGE_CODES = frozenset({tidb.TXN_TOO_LARGE})
# tidb-binlog's loader ignores these when it runs a DDL (a DDL replayed after a crash between
# the DDL and its checkpoint): database exists (1007), can't drop missing database (1008),
# unknown database (1049), table exists (1050), unknown table (1051), unknown column (1054),
# duplicate column (1060), duplicate key name (1061), can't drop field or key (1091), table
# doesn't exist (1146), duplicate index (1831).
IGNORABLE_DDL_CODES = frozenset({1007, 1008, 1049, 1050, 1051, 1054, 1060, 1061, 1091, 1146, 1831})


def error_code(e: BaseException | None) -> int:
    """The MySQL error number of a driver error; 0 for anything else."""
    if isinstance(e, MySQLError) and e.args and isinstance(e.args[0], int):
        return e.args[0]
    return 0


def is_retriable(e: BaseException) -> bool:
    """Connection trouble or a transient server condition (by code)."""
    if isinstance(e, InterfaceError | OSError):  # not connected / closed; socket errors
        return True
    return error_code(e) in RETRIABLE_CODES


def sink_error(what: str, e: BaseException) -> SinkError:
    return SinkError(f"mysql sink: {what}: {e}", retriable=is_retriable(e))


# Characters of statements sent as one multi-statement query: well under the 16 MiB default
# max_allowed_packet of MySQL and MariaDB (statements of values are cut at about 1 MiB).
MAX_QUERY = 4 << 20

# What the apply paths catch: driver errors and socket trouble (asyncmy lets some through).
DRIVER_ERRORS = (MySQLError, OSError)


@dataclass(frozen=True, slots=True)
class ConnectParams:
    host: str
    port: int
    user: str
    password: str
    time_zone: str = "+00:00"
    read_timeout: float = 60.0  # seconds a statement's reply may take
    connect_timeout: float = 10.0

    def __repr__(self) -> str:  # keep the password out of logs
        return f"ConnectParams({self.user}@{self.host}:{self.port}, tz={self.time_zone})"


class QueryTiming:
    """Where a downstream's sessions report how long the queries of their transactions take:
    ``observe(type, seconds)`` with type ``exec`` (BEGIN and the statements) or ``commit``
    (tidb-binlog's ``query_duration_time`` types); None reports nothing."""

    def __init__(self) -> None:
        self.observe: Callable[[str, float], None] | None = None


class Gate:
    """Where a downstream's sessions ask whether a write may start (``sinks.port.GatesWrites``):
    ``check`` raises ``WriteRefused`` to refuse; None lets everything through."""

    def __init__(self) -> None:
        self.check: WriteGate | None = None

    def allow(self) -> None:
        if self.check is not None:
            self.check()


class Session:
    """One connection: statements with a reply deadline of ``read_timeout`` each.

    The deadline is ours (``asyncio.timeout``), not the driver's: its ``asyncio.wait_for``
    on Python 3.11 can swallow a cancellation that arrives as a reply does. A statement past
    its deadline raises TimeoutError (retriable) and leaves the connection closed.
    """

    def __init__(
        self,
        conn: Connection,
        read_timeout: float,
        timing: QueryTiming | None = None,
        gate: Gate | None = None,
    ) -> None:
        self._conn = conn
        self._timeout = read_timeout
        self._cur = conn.cursor()
        self._timing = timing or QueryTiming()
        self._gate = gate or Gate()
        self.tidb = False  # the server is TiDB (``connect`` finds out)

    def allow_write(self) -> None:
        """Raise ``WriteRefused`` unless the gate lets a downstream write start now."""
        self._gate.allow()

    async def execute(self, sql: str, args: Sequence[SqlValue] | None = None) -> None:
        """One statement; without ``args`` the text is sent as it is (no ``%`` formatting)."""
        async with asyncio.timeout(self._timeout):
            await self._cur.execute(sql, args)

    async def query(self, sql: str, args: Sequence[SqlValue] | None = None) -> list[Any]:
        async with asyncio.timeout(self._timeout):
            await self._cur.execute(sql, args)
            return list(await self._cur.fetchall())

    async def run(self, stmts: Iterable[Statement]) -> None:
        for s in stmts:
            async with asyncio.timeout(self._timeout):
                await self._cur.execute(s.sql, s.args)

    async def transaction(self, stmts: Sequence[Statement]) -> None:
        """``stmts`` in one transaction: BEGIN and the statements (each formatted with its
        parameters by the driver) in as few multi-statement queries as ``MAX_QUERY`` allows,
        then COMMIT: two round trips for a usual batch, whatever its number of statements.
        COMMIT goes only once every statement succeeded, so a connection lost or dropped
        before it leaves nothing committed. The server stops at a failing statement with the
        transaction still open (the caller rolls it back). The gate is asked before BEGIN and
        again right before COMMIT: refused there, the transaction is left open and the caller
        drops the connection (the server rolls it back)."""
        cur = self._cur
        observe = self._timing.observe
        self._gate.allow()
        start = time.perf_counter()
        for text in queries(["BEGIN", *[cur.mogrify(s.sql, s.args) for s in stmts]]):
            async with asyncio.timeout(self._timeout):
                await cur.execute(text)
                while await cur.nextset():
                    pass
        if observe is not None:
            now = time.perf_counter()
            observe("exec", now - start)
            start = now
        self._gate.allow()  # nothing awaited between this and sending COMMIT
        async with asyncio.timeout(self._timeout):
            await self._conn.commit()
        if observe is not None:
            observe("commit", time.perf_counter() - start)

    async def begin(self, *, checked: bool = False) -> None:
        """BEGIN; ``checked``: unique keys are checked at each statement, not only at COMMIT
        (TiDB's optimistic transactions defer them: ``sinks.mysql.tidb``)."""
        async with asyncio.timeout(self._timeout):
            if checked and self.tidb:
                await self._cur.execute(tidb.BEGIN_CHECKED)
            else:
                await self._conn.begin()

    async def commit(self) -> None:
        async with asyncio.timeout(self._timeout):
            await self._conn.commit()

    async def rollback_quietly(self) -> None:
        """Roll back after a failed statement; a connection too broken for that is dropped
        by the caller."""
        try:
            async with asyncio.timeout(self._timeout):
                await self._conn.rollback()
        except DRIVER_ERRORS as e:
            log.debug("rollback failed: %s", e)

    def close(self) -> None:
        self._conn.close()

    async def quit(self) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._conn.ensure_closed()
        except DRIVER_ERRORS:
            self._conn.close()


def queries(texts: Sequence[str], limit: int = MAX_QUERY) -> Iterator[str]:
    """``texts`` joined into multi-statement queries of at most ``limit`` characters (a longer
    statement is a query of its own), in order: ``["a", "bb", "c"]`` with limit 5 gives
    ``"a;\\nbb"`` and ``"c"``."""
    start, size = 0, 0
    for i, text in enumerate(texts):
        if i > start and size + len(text) > limit:
            yield ";\n".join(texts[start:i])
            start, size = i, 0
        size += len(text) + 2
    if start < len(texts):
        yield ";\n".join(texts[start:])


async def connect(
    p: ConnectParams, timing: QueryTiming | None = None, gate: Gate | None = None
) -> Session:
    conn = await asyncmy.connect(
        host=p.host,
        port=p.port,
        user=p.user,
        password=p.password,
        charset="utf8mb4",
        autocommit=True,
        binary_prefix=True,
        connect_timeout=max(1, round(p.connect_timeout)),
    )
    session = Session(conn, p.read_timeout, timing, gate)
    try:
        await session.execute("SET SESSION time_zone = %s, foreign_key_checks = 0", (p.time_zone,))
        [(sql_mode, version)] = await session.query("SELECT @@SESSION.sql_mode, VERSION()")
        modes = str(sql_mode or "").split(",")
        if "NO_BACKSLASH_ESCAPES" in modes:
            keep = ",".join(m for m in modes if m and m != "NO_BACKSLASH_ESCAPES")
            await session.execute("SET SESSION sql_mode = %s", (keep,))
        if tidb.is_tidb(str(version)):
            session.tidb = True
            await _tidb_session(session)
    except BaseException:
        conn.close()
        raise
    return session


async def _tidb_session(session: Session) -> None:
    """The session variables of ``sinks.mysql.tidb``; one this TiDB does not have is skipped."""
    for name, value in tidb.SESSION:
        try:
            await session.execute(f"SET SESSION {name} = %s", (value,))
        except MySQLError as e:
            if error_code(e) != tidb.UNKNOWN_SYSTEM_VARIABLE:
                raise
            log.info("the downstream TiDB has no %s: %s", name, e)


class Downstream:
    """``count`` connections to one server, opened on first use and after ``drop``."""

    def __init__(self, params: ConnectParams, count: int = 1) -> None:
        self.params = params
        self.timing = QueryTiming()
        self.gate = Gate()
        self._sessions: list[Session | None] = [None] * count

    async def get(self, i: int = 0) -> Session:
        session = self._sessions[i]
        if session is None:
            session = self._sessions[i] = await connect(self.params, self.timing, self.gate)
        return session

    def current(self, i: int = 0) -> Session | None:
        """Connection ``i`` if it is open (no connecting)."""
        return self._sessions[i]

    def drop(self, i: int | None = None) -> None:
        """Close connection ``i`` (all when None) without talking to the server."""
        for j in range(len(self._sessions)) if i is None else (i,):
            session = self._sessions[j]
            self._sessions[j] = None
            if session is not None:
                session.close()

    async def close(self) -> None:
        for j, session in enumerate(self._sessions):
            self._sessions[j] = None
            if session is not None:
                await session.quit()
