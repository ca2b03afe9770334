"""Parallel apply for the MySQL sink (``consistent=false``): tidb-binlog's loader dispatch.

Row changes go to ``workers`` connections by causality key (``sinks.mysql.causality``): changes that
share a row or a unique value land on one worker in upstream order; on a conflict everything
dispatched so far runs to completion before dispatch goes on. Each worker applies its changes
in downstream transactions of ``batch_size`` changes, all workers at once; each such
transaction's changes are compacted per primary key like a consistent-mode batch
(``sinks.compact``, tidb-binlog's "merge" mode): the keys a worker holds are its alone until
the next flush, so the downstream agrees with the upstream on them before each of its
transactions, which is what compaction needs.

Trade-off: upstream transactions are split across workers and downstream transactions, so
while a stretch runs, and after a crash in the middle of one, the downstream holds part of
it beyond the checkpoint. The checkpoint (saved by the sink once every worker is done) never
passes a change that is not applied; a replay from it re-applies changes already there, which
safe mode makes harmless (the drainer keeps safe mode on for a while after each start, and the
sink applies a stretch again in safe mode after it failed part way) except on tables with
neither a primary nor a unique key, where a replayed INSERT adds the row twice (as in
tidb-binlog). Use the consistent mode where that matters.

A lock conflict between workers (gap locks, scans of keyless tables; on TiDB a write conflict
at COMMIT) rolls back one worker's transaction only; that worker runs it again, a few times,
before giving up with a retriable error. A worker's transaction the downstream refuses for its
size (TiDB's ``txn-total-size-limit``: a few big rows) runs again as two halves.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence

from tributary.change import RowChange, Txn
from tributary.sinks.compact import late_tables
from tributary.sinks.mysql.apply import (
    TxnTooLarge,
    groups_of,
    run_transaction,
    stretch_statements,
)
from tributary.sinks.mysql.causality import Causality, keys_of
from tributary.sinks.mysql.conn import (
    DRIVER_ERRORS,
    LOCK_CODES,
    Downstream,
    Session,
    error_code,
    sink_error,
)
from tributary.sinks.port import SinkError

log = logging.getLogger(__name__)

Item = tuple[int, RowChange]  # upstream commit ts, change
Late = frozenset[tuple[str, str]]  # tables applied in upstream order (``compact.late_tables``)
LOCK_RETRIES = 8  # a worker runs a transaction rolled back by a lock conflict again this often
LOCK_BACKOFF = 0.02  # seconds before the first such retry, doubling


class ParallelApplier:
    """Workers on connections ``first .. first + workers - 1`` of ``down``."""

    def __init__(
        self,
        down: Downstream,
        first: int,
        workers: int,
        batch_size: int,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._down = down
        self._sleep = sleep
        self._first = first
        self._workers = workers
        self._batch_size = batch_size
        self.flushes = 0  # runs of the workers (a conflict adds one)

    async def apply(self, txns: Sequence[Txn], *, safe: bool, seen: int = 0) -> None:
        """Every row change of ``txns`` applied when this returns; SinkError otherwise.
        ``seen``: the newest schema version before them (``compact.late_tables``)."""
        late = late_tables(txns, seen)
        causality = Causality(self._workers)
        queues: list[list[Item]] = [[] for _ in range(self._workers)]
        for txn in txns:
            for change in txn.rows:
                keys = keys_of(change)
                worker = causality.assign(keys)
                if worker is None:  # held by two workers: run what is queued first
                    await self._flush(queues, safe, late)
                    causality.reset()
                    worker = causality.assign(keys)
                    assert worker is not None
                queues[worker].append((txn.commit_ts, change))
        await self._flush(queues, safe, late)

    async def _flush(self, queues: list[list[Item]], safe: bool, late: Late) -> None:
        work = [(i, list(q)) for i, q in enumerate(queues) if q]
        for q in queues:
            q.clear()
        if not work:
            return
        self.flushes += 1
        try:
            async with asyncio.TaskGroup() as tg:
                for i, items in work:
                    tg.create_task(self._work(i, items, safe, late), name=f"mysql-sink-worker-{i}")
        except BaseExceptionGroup as group:
            self._down.drop()  # cancelled workers left their connections mid-statement
            raise _pick(group) from group

    async def _work(self, worker: int, items: list[Item], safe: bool, late: Late) -> None:
        try:
            conn = await self._down.get(self._first + worker)
        except DRIVER_ERRORS as e:
            raise sink_error(f"worker {worker} cannot connect", e) from e
        for start in range(0, len(items), self._batch_size):
            await self._run(worker, conn, items[start : start + self._batch_size], safe, late)

    async def _run(
        self, worker: int, conn: Session, part: list[Item], safe: bool, late: Late
    ) -> None:
        """``part`` in one downstream transaction; refused for its size, as two halves."""
        changes = [c for _, c in part]
        ts = (part[0][0], part[-1][0])
        stmts = stretch_statements(changes, safe=safe, late=late, ts=ts)
        blame = functools.partial(groups_of, part, safe=safe)
        for attempt in itertools.count():
            try:
                await run_transaction(conn, stmts, blame, ts)
                return
            except TxnTooLarge as e:
                if len(part) == 1:
                    raise
                half = len(part) // 2
                log.warning(
                    "worker %d: %s; as two, of %d and %d changes", worker, e, half, len(part) - half
                )
                await self._run(worker, conn, part[:half], safe, late)
                await self._run(worker, conn, part[half:], safe, late)
                return
            except SinkError as e:
                # A lock conflict (often gap locks between workers) rolled back just this
                # transaction: run it again here, the other workers' work stands.
                if error_code(e.__cause__) not in LOCK_CODES or attempt >= LOCK_RETRIES:
                    raise
                log.info("worker %d: %s; again", worker, e)
                await self._sleep(LOCK_BACKOFF * 2**attempt)


def _pick(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error to report for a failed flush: a non-retriable SinkError first."""
    errors = [e for e in _leaves(group)]
    sink_errors = [e for e in errors if isinstance(e, SinkError)]
    for e in sink_errors:
        if not e.retriable:
            return e
    if sink_errors:
        return sink_errors[0]
    return errors[0]


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out
