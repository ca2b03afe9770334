"""The MySQL/MariaDB/TiDB sink.

URL: ``mysql://user:password@host:port/?option=value&...`` (``sinks.mysql.config`` parses it):
user and password percent-encoded, no user means root, no database path. Options, all
optional: ``consistent=true|false`` (true), ``worker-count`` and ``batch-size`` (the sink
options' ``worker_count`` / ``batch_size``: connections and row changes per downstream
transaction of the parallel mode), ``time-zone`` (``+00:00``: the session zone TIMESTAMP
values are formatted in), ``checkpoint-schema`` / ``checkpoint-table`` (``tidb_binlog`` /
``checkpoint``), ``read-timeout`` (60 s per statement reply), ``retries`` (10). Unknown options
are an error. Example: ``mysql://root:s%40cret@10.0.0.5:3306/?consistent=false&worker-count=8``.

The checkpoint is tidb-binlog's: the row of ``tidb_binlog.checkpoint`` keyed by the upstream
cluster ID, holding its JSON. Sessions run with ``foreign_key_checks=0``: the upstream already
checked its constraints, and both modes reorder changes across tables.

A batch is cut into stretches of row transactions and single DDLs. A DDL runs alone after what
came before it is committed, then the checkpoint moves to it. A DDL runs once
(``sinks.mysql.ddlmark``): its commit ts is recorded per ``ddl_key`` in
``<checkpoint-schema>.<checkpoint-table>_ddl_ts``, as started before it and as finished with the
checkpoint row after it; a DDL at or below a finished record is skipped, and a replay after a
crash in between is skipped by error code (``sinks.mysql.conn``) or, for an index added
without a name, when an identical index is there.

* consistent (default): each stretch is one downstream transaction with the checkpoint row, its
  rows compacted per primary key (``sinks.compact``). Invariant: the downstream holds exactly
  the transactions up to the checkpoint, whatever fails or crashes; except while one upstream
  transaction too large for a downstream one is applied in pieces, when the checkpoint row
  says ``consistent: false`` (below).
* parallel (``consistent=false``): stretches go through ``sinks.mysql.parallel`` (causality
  dispatch to ``worker-count`` connections); the checkpoint is saved on its own once every
  worker is done, with ``consistent: false`` until a clean close. Invariant: the checkpoint
  never passes an unapplied change; after a crash the downstream may hold part of the batch
  after it, which a replay in safe mode overwrites.

TiDB (found by its version, behind ``mysql://`` or ``tidb://``): sessions run optimistic
transactions and take explicit AUTO_RANDOM keys (``sinks.mysql.tidb``). A transaction TiDB
refuses for its size (``txn-total-size-limit``) is split, not retried as it is: a stretch in two
halves of whole upstream transactions, each with its checkpoint row, down to one transaction,
which is applied in pieces (``sinks.mysql.split``); a parallel worker's transaction in halves.
A checkpoint row read with ``consistent: false`` (such pieces, or a parallel stretch cut short)
makes the next stretch run in safe mode.

In both modes, the tables a late transaction writes (one whose schema version is below a
version seen before it: TiDB's metadata lock lets it commit after a DDL it started before) are
not compacted: their rows are applied in upstream order, each with its own version's columns
(``compact.late_tables``; the newest version seen is kept in the checkpoint).

Write gate (``sinks.port.GatesWrites``): ``write_gate`` is asked right before each
downstream transaction's statements, its COMMIT, a DDL and a checkpoint save; a refusal
(``WriteRefused``) drops the connections (the server rolls back what is open) and reaches the
caller unretried, the checkpoint where the last committed stretch left it.

Retriable errors (by code: lost connection, deadlock, shutdown, ...) reconnect, re-read the
checkpoint (so a COMMIT whose reply was lost is not applied twice) and retry the batch from it
with a doubling backoff, ``retries`` times, then raise a retriable SinkError. Other errors are
a SinkError naming the commit ts of the upstream transaction that failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from urllib.parse import SplitResult

from tributary.change import Txn
from tributary.sinks.checkpoint import (
    CheckpointRecord,
    checkpoint_load,
    checkpoint_save,
    checkpoint_setup,
)
from tributary.sinks.mysql.apply import (
    DdlBook,
    TxnTooLarge,
    apply_ddl,
    apply_stretch,
    save_alone,
)
from tributary.sinks.mysql.config import MysqlConfig, parse_url
from tributary.sinks.mysql.conn import DRIVER_ERRORS, Downstream, Session, sink_error
from tributary.sinks.mysql.ddlmark import mark_forget_finished, mark_setup, mark_table
from tributary.sinks.mysql.parallel import ParallelApplier
from tributary.sinks.mysql.split import apply_in_pieces
from tributary.sinks.port import (
    QueryTimer,
    SinkError,
    SinkOptions,
    WriteGate,
    WriteRefused,
    pending,
)
from tributary.sql import MYSQL, Statement

log = logging.getLogger(__name__)

BACKOFF_FIRST = 0.1  # seconds before the first retry, doubling ...
BACKOFF_MAX = 3.0  # ... up to this
Sleep = Callable[[float], Awaitable[None]]


def stretches(txns: Sequence[Txn]) -> list[list[Txn]]:
    """Runs of row (and checkpoint-only) transactions, each DDL a run of its own."""
    out: list[list[Txn]] = []
    for t in txns:
        if t.ddl is not None or not out or out[-1][-1].ddl is not None:
            out.append([t])
        else:
            out[-1].append(t)
    return out


class MysqlSink:
    """Applies batches to a MySQL-protocol downstream; ``safe_mode`` may change between them."""

    def __init__(
        self,
        config: MysqlConfig,
        cluster_id: int,
        safe_mode: bool = False,
        sleep: Sleep = asyncio.sleep,
        ddl_key: int | None = None,
    ) -> None:
        self.config = config
        self.safe_mode = safe_mode
        self._cluster_id = cluster_id
        self._ddl = DdlBook(
            cluster_id if ddl_key is None else ddl_key,
            config.checkpoint_schema,
            mark_table(config.checkpoint_table),
        )
        self._sleep = sleep  # injectable for tests of the backoff
        workers = 0 if config.consistent else config.worker_count
        self._down = Downstream(config.connect, 1 + workers)
        self._parallel = (
            ParallelApplier(self._down, 1, workers, config.batch_size, sleep) if workers else None
        )
        self._saved: CheckpointRecord | None = None
        # the downstream may be ahead of the checkpoint (a parallel stretch failed part way, a
        # transaction applied in pieces, a checkpoint read saying consistent: false)
        self._unfinished = False
        self._stale = False  # connections were dropped mid-batch: re-read the checkpoint
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(
        cls,
        config: MysqlConfig,
        *,
        cluster_id: int,
        safe_mode: bool = False,
        sleep: Sleep = asyncio.sleep,
        ddl_key: int | None = None,
    ) -> MysqlSink:
        """Connect, create the checkpoint and DDL record tables if missing and read the
        checkpoint; ``ddl_key`` keys the DDL record (default ``cluster_id``)."""
        sink = cls(config, cluster_id, safe_mode, sleep, ddl_key)
        try:
            await sink._retrying("opening", lambda _: sink._load())
        except BaseException:
            await sink._down.close()
            raise
        log.info("mysql sink %r opened at checkpoint %s", config.connect, await sink.checkpoint())
        return sink

    @property
    def query_timer(self) -> QueryTimer | None:
        """Told the seconds of each downstream transaction's queries, by type (``exec`` for
        BEGIN and the statements, ``commit``), on every connection; None: not timed."""
        return self._down.timing.observe

    @query_timer.setter
    def query_timer(self, timer: QueryTimer | None) -> None:
        self._down.timing.observe = timer

    @property
    def write_gate(self) -> WriteGate | None:
        """Asked right before each downstream write starts; None lets every write through."""
        return self._down.gate.check

    @write_gate.setter
    def write_gate(self, gate: WriteGate | None) -> None:
        self._down.gate.check = gate

    async def __aenter__(self) -> MysqlSink:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def checkpoint(self) -> int | None:
        return self._saved.commit_ts if self._saved else None

    def _where(self) -> dict[str, str]:
        return {"schema": self.config.checkpoint_schema, "table": self.config.checkpoint_table}

    async def _load(self) -> None:
        try:
            conn = await self._down.get()
            found = await conn.query(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = %s AND table_name IN (%s, %s)",
                (self.config.checkpoint_schema, self.config.checkpoint_table, self._ddl.table),
            )
            tables = {str(name) for (name,) in found}
            # IF NOT EXISTS alone would log a warning at every start
            if self.config.checkpoint_table not in tables:
                for sql in checkpoint_setup(MYSQL, **self._where()):
                    await conn.execute(sql)
            if self._ddl.table not in tables:
                for sql in mark_setup(self._ddl.schema, self._ddl.table):
                    await conn.execute(sql)
            load = checkpoint_load(MYSQL, self._cluster_id, **self._where())
            rows = await conn.query(load.sql, load.args)
            if not rows and self._ddl.key == self._cluster_id:
                # a finished DDL record without its checkpoint row: the row was removed by
                # hand for a fresh start (record and row are written together)
                forget = mark_forget_finished(self._ddl.key, self._ddl.schema, self._ddl.table)
                await conn.execute(forget.sql, forget.args)
        except DRIVER_ERRORS as e:
            raise sink_error("cannot read the checkpoint", e) from e
        self._saved = CheckpointRecord.from_json(str(rows[0][0])) if rows else None
        if self._saved is not None and not self._saved.consistent:
            self._unfinished = True  # the downstream may be ahead of it: replay in safe mode
        self._stale = False

    def _record(self, txns: Sequence[Txn], consistent: bool) -> CheckpointRecord:
        before = self._saved.schema_version if self._saved else 0
        version = max([before, *(t.schema_version for t in txns)])
        return CheckpointRecord(txns[-1].commit_ts, consistent=consistent, schema_version=version)

    def _save(self, record: CheckpointRecord) -> Statement:
        return checkpoint_save(MYSQL, self._cluster_id, record.to_json(), **self._where())

    async def apply(self, txns: Sequence[Txn]) -> None:
        async with self._lock:
            if self._closed:
                raise SinkError("mysql sink is closed")
            if not pending(txns, await self.checkpoint()):  # also checks the order
                return

            async def attempt(n: int) -> None:
                if self._stale:  # e.g. a COMMIT whose reply was lost: what is really there?
                    await self._load()
                await self._apply(pending(txns, await self.checkpoint()))

            try:
                await self._retrying("applying a batch", attempt)
            except (asyncio.CancelledError, WriteRefused):
                self._drop()  # mid-statement: the server rolls back what is open
                raise

    def _drop(self) -> None:
        self._down.drop()
        self._stale = True

    async def _apply(self, todo: Sequence[Txn]) -> None:
        for part in stretches(todo):
            conn = await self._connection()
            seen = self._saved.schema_version if self._saved else 0
            if part[0].ddl is not None:
                record = self._record(part, consistent=True)  # nothing after it is applied
                await apply_ddl(conn, part[0], self._ddl, self._save(record), safe=self.safe_mode)
            elif self._parallel is None:
                await self._apply_rows(conn, part)
                continue
            else:
                replay = self._unfinished  # part of it may be there already: replace
                self._unfinished = True
                await self._parallel.apply(part, safe=self.safe_mode or replay, seen=seen)
                record = self._record(part, consistent=False)
                await save_alone(conn, self._save(record))
                self._unfinished = False
            self._saved = record

    async def _apply_rows(self, conn: Session, part: Sequence[Txn]) -> None:
        """Row transactions in one downstream transaction with their checkpoint row; refused
        for its size, as two halves, and a single transaction in pieces (``sinks.mysql.split``).
        After a checkpoint saying ``consistent: false``, in safe mode."""
        seen = self._saved.schema_version if self._saved else 0
        record = self._record(part, consistent=True)
        safe = self.safe_mode or self._unfinished
        try:
            await apply_stretch(conn, part, self._save(record), safe, seen=seen)
        except TxnTooLarge as e:
            if len(part) == 1:
                await self._apply_in_pieces(conn, part[0], e)
                return
            half = len(part) // 2
            log.warning("%s; as two, of %d and %d transactions", e, half, len(part) - half)
            await self._apply_rows(conn, part[:half])
            await self._apply_rows(conn, part[half:])
            return
        self._saved, self._unfinished = record, False

    async def _apply_in_pieces(self, conn: Session, txn: Txn, refusal: TxnTooLarge) -> None:
        """One transaction too large alone: the checkpoint marked ``consistent: false`` (at
        the commit ts before it), then the pieces, the real checkpoint with the last."""
        before = self._saved
        mark = CheckpointRecord(
            before.commit_ts if before else txn.commit_ts - 1,
            consistent=False,
            schema_version=before.schema_version if before else 0,
        )
        await save_alone(conn, self._save(mark))
        self._saved, self._unfinished = mark, True
        record = self._record([txn], consistent=True)
        pieces = await apply_in_pieces(conn, txn, self._save(record), seen=mark.schema_version)
        log.warning("%s; applied in %d pieces", refusal, pieces)
        self._saved, self._unfinished = record, False

    async def _connection(self) -> Session:
        try:
            return await self._down.get()
        except DRIVER_ERRORS as e:
            raise sink_error("cannot connect", e) from e

    async def _retrying(self, what: str, step: Callable[[int], Awaitable[None]]) -> None:
        """``step(attempt)`` until it succeeds, retrying retriable SinkErrors with backoff."""
        attempt = 0
        while True:
            try:
                await step(attempt)
                return
            except SinkError as e:
                if not e.retriable:
                    raise
                self._drop()
                if attempt >= self.config.retries:
                    last = str(e).removeprefix("mysql sink: ")
                    raise SinkError(
                        f"mysql sink: {what} failed {attempt + 1} times, last: {last}",
                        retriable=True,
                    ) from e
                delay = min(BACKOFF_FIRST * 2**attempt, BACKOFF_MAX)
                attempt += 1
                log.warning("%s; retry %d of %d in %.1f s", e, attempt, self.config.retries, delay)
                await self._sleep(delay)

    async def close(self) -> None:
        """Mark a parallel-mode checkpoint consistent if nothing is half done, and disconnect."""
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            conn = self._down.current()
            try:
                if self._saved and not self._saved.consistent and not self._unfinished and conn:
                    s = self._saved
                    done = CheckpointRecord(s.commit_ts, True, s.schema_version, s.ts_map)
                    await conn.run([self._save(done)])
            except DRIVER_ERRORS as e:
                log.warning("mysql sink: cannot mark the checkpoint consistent: %s", e)
            finally:
                await self._down.close()


async def open_url(url: SplitResult, options: SinkOptions) -> MysqlSink:
    """The sink ``mysql://...`` describes (``sinks.mysql.config``), opened."""
    config = parse_url(url, options)
    return await MysqlSink.open(
        config,
        cluster_id=options.cluster_id,
        safe_mode=options.safe_mode,
        ddl_key=options.ddl_key,
    )
