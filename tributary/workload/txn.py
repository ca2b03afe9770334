"""One upstream transaction with its binlogs, the way TiDB writes them.

Per attempt (worked example, a bank transfer)::

    read locks on the tables (catalog)       -> schema version v of their table infos
    start_ts = TSO                           -> 1000
    BEGIN; SELECT ... FOR UPDATE; UPDATE ...    (the body; rows recorded as it goes)
    prewrite(1000, PrewriteValue{v, rows})   -> P-binlog stored by a pump
    commit_ts = TSO                          -> 1007, while the row locks are still held
    COMMIT                                   -> ok: commit(1000, 1007); failed: ROLLBACK and
                                                rollback(1000)
    release the read locks

Taking the commit ts before COMMIT, with the locks held, orders conflicting transactions
correctly: a transaction waiting for our row locks gets its commit ts after ours. Taking the
commit ts only after the prewrite was stored means no pump can have emitted a fake binlog
above it before the prewrite arrived.

Invariants: a prewrite that was (or may have been) stored is always followed by a commit or a
rollback binlog (also on a failed prewrite, a TSO failure or a cancellation); a commit binlog is
written only after the upstream COMMIT succeeded. A conflict (deadlock, lock wait timeout,
duplicate key) or a lost connection runs the body again as a new transaction (new start ts,
fresh reads).
Not covered: a COMMIT whose reply is lost may have committed upstream; it is counted as rolled
back (TiDB resolves that case by asking TiKV for the transaction's status).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from tributary.pumpclient import PumpClientError
from tributary.sinks.pump.rows import BinlogWriter as BinlogWriter  # re-exported
from tributary.sinks.pump.rows import MutationBuilder
from tributary.sinks.pump.values import Value
from tributary.tso.client import Tso
from tributary.tso.errors import TsoError
from tributary.workload.catalog import Catalog, Table
from tributary.workload.errors import Abort, UpstreamError, WorkloadError
from tributary.workload.rows import Row, RowOps
from tributary.workload.stats import Committed, WorkloadStats
from tributary.workload.upstream import Session, Upstream

log = logging.getLogger(__name__)


class TxnContext:
    """What a transaction body sees: the locked tables and typed row operations that also
    record each change for the binlog."""

    def __init__(self, ops: RowOps, catalog: Catalog, builder: MutationBuilder, version: int):
        self._ops = ops
        self._catalog = catalog
        self._builder = builder
        self.schema_version = version

    @property
    def rows(self) -> int:
        return self._builder.rows

    def table(self, table_id: int) -> Table:
        """The table's current info; Abort if a DDL dropped it before we got its lock."""
        table = self._catalog.table_by_id(table_id)
        if table is None:
            raise Abort(f"table id {table_id} is gone")
        return table

    async def get(self, table: Table, key: Mapping[str, Value]) -> Row | None:
        return await self._ops.get(table, key)

    async def scan(self, table: Table, column: str, start: Value, limit: int = 1) -> list[Row]:
        return await self._ops.scan(table, column, start, limit)

    async def max(self, table: Table, column: str) -> Value:
        return await self._ops.max(table, column)

    async def insert(self, table: Table, rows: Sequence[Mapping[str, Value]]) -> None:
        if rows:
            await self._ops.insert(table, rows)
            for row in rows:
                self._builder.insert(table, row)

    async def update(
        self, table: Table, old: Mapping[str, Value], new: Mapping[str, Value]
    ) -> None:
        if dict(old) != dict(new):
            await self._ops.update(table, old, new)
            self._builder.update(table, old, new)

    async def delete(self, table: Table, old: Mapping[str, Value]) -> None:
        await self._ops.delete(table, old)
        self._builder.delete(table, old)


Body = Callable[[TxnContext], Awaitable[None]]


async def _quiet_rollback(session: Session) -> None:
    with contextlib.suppress(UpstreamError):
        await session.rollback()


class Executor:
    def __init__(
        self,
        upstream: Upstream,
        binlogs: BinlogWriter,
        tso: Tso,
        catalog: Catalog,
        stats: WorkloadStats,
        *,
        record_latency: bool = False,
        wall_clock: Callable[[], float] = time.time,
        max_attempts: int = 30,
        retry_pause: float = 0.005,
    ) -> None:
        self._upstream = upstream
        self._binlogs = binlogs
        self._tso = tso
        self.catalog = catalog
        self.stats = stats
        self._record = record_latency
        self._wall_clock = wall_clock
        self._max_attempts = max_attempts
        self._retry_pause = retry_pause

    async def run(self, table_ids: Sequence[int], body: Body) -> bool:
        """Run ``body`` as one transaction (again, as a new one, after a retriable failure);
        True once committed, False if given up or aborted. Fatal errors propagate."""
        for attempt in range(1, self._max_attempts + 1):
            try:
                return await self._attempt(table_ids, body)
            except Abort as e:
                log.debug("transaction dropped: %s", e)
                self.stats.aborted += 1
                return False
            except WorkloadError as e:
                if not e.retriable:
                    raise
                self.stats.retries += 1
                log.debug("attempt %d failed, retrying as a new transaction: %s", attempt, e)
                await asyncio.sleep(self._retry_pause * min(attempt, 20))
        self.stats.failures += 1
        log.warning("transaction given up after %d attempts", self._max_attempts)
        return False

    async def _ts(self, what: str) -> int:
        try:
            return await self._tso.get_ts()
        except TsoError as e:
            raise WorkloadError(f"no {what} from the TSO: {e}", retriable=e.retriable) from e

    async def _attempt(self, table_ids: Sequence[int], body: Body) -> bool:
        async with self.catalog.reading(table_ids) as version:
            start_ts = await self._ts("start ts")
            async with self._upstream.session() as session:
                await session.begin()
                builder = MutationBuilder()
                try:
                    ops = RowOps(session, self._upstream.dialect)
                    await body(TxnContext(ops, self.catalog, builder, version))
                    if builder.rows == 0:
                        await session.commit()  # nothing written: no binlog, as TiDB
                        return True
                except BaseException:
                    await _quiet_rollback(session)
                    raise
                await self._two_phase(session, start_ts, builder, version)
                return True

    async def _two_phase(
        self, session: Session, start_ts: int, builder: MutationBuilder, version: int
    ) -> None:
        try:
            await self._binlogs.prewrite(start_ts, builder.encode(version), builder.first_key)
        except PumpClientError as e:
            await _quiet_rollback(session)
            if e.maybe_stored:  # a pump whose answer was lost may hold it: roll it back there
                await self._binlogs.rollback(start_ts)
            raise WorkloadError(f"prewrite of {start_ts} failed: {e}", retriable=e.retriable) from e
        committed = False
        try:
            commit_ts = await self._ts("commit ts")
            await session.commit()
            committed = True
        finally:
            if not committed:
                await _quiet_rollback(session)
                await self._binlogs.rollback(start_ts)
                self.stats.rollbacks += 1
                log.info("transaction %d rolled back after its prewrite", start_ts)
        committed_at = self._wall_clock()
        await self._binlogs.commit(start_ts, commit_ts)
        self.stats.commits += 1
        self.stats.rows += builder.rows
        self.stats.max_commit_ts = max(self.stats.max_commit_ts, commit_ts)
        if self._record:
            self.stats.latencies.append(Committed(commit_ts, committed_at))
