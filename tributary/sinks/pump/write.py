"""Whole transactions into the pump cluster as TiDB writes them: P-binlog, then C-binlog.

Timestamps come from the TSO at write time, never from the Txn: pumps and drainers order by
TSO time, and a pump's fake binlogs (TSO ts) would otherwise overtake the writes. A run of DML
transactions is pipelined; worked example for three transactions T1..T3::

    encode T1, T2, T3 in order (tables resolved in the catalog: schema version v)
    start ts  = TSO x3, concurrently       -> 101, 102, 103
    prewrite  x3, concurrently             -> every P-binlog stored by a pump
    commit ts = TSO x3 once all are stored -> 104, 105, 106, given to T1, T2, T3 in order
    commit    x3, concurrently

So the drainer emits them in the Txns' order (commit ts order), and each commit ts is taken
after its prewrite was stored, so no fake binlog passes it. A DDL is written alone: its job
is appended to the history first (``PumpCatalog.record_ddl``), then the DDL binlog
(``prewrite`` with ``ddl_query`` and ``ddl_job_id``, no value), then its commit.

Invariant: a stored prewrite is followed by its commit, or by a rollback when no commit ts
could be had; a rollback goes only where a pump may hold the prewrite (the pump client sends
it there): a prewrite that failed and that no pump may hold (``PumpClientError.maybe_stored``
false) gets none, so it is not sent to every pump; a failure raises ``SinkError``
(retriable when the layer below says so) and a caller writing the same Txns again writes
them as new transactions (at-least-once: the drainer's safe mode makes the replay harmless).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from tributary.change import Ddl, Row, RowChange, RowKind, Txn
from tributary.change import TableInfo as SinkTable
from tributary.errors import TributaryError
from tributary.pumpclient import PumpClientError
from tributary.sinks.port import SinkError
from tributary.sinks.pump.catalog import PumpCatalog
from tributary.sinks.pump.rows import BinlogWriter, MutationBuilder, Table
from tributary.sinks.pump.values import Value, typed
from tributary.tidbcodec import CodecError
from tributary.tso.client import Tso
from tributary.tso.errors import TsoError

log = logging.getLogger(__name__)

T = TypeVar("T")


def _mapped(e: PumpClientError | TsoError, doing: str) -> SinkError:
    return SinkError(f"pump sink: {doing}: {e}", retriable=e.retriable)


def _typed_row(table: Table, values: Row) -> dict[str, Value]:
    exact = all(c.name in values for c in table.columns)
    lower = values if exact else {k.lower(): v for k, v in values.items()}
    return {
        c.name: typed(lower.get(c.name if exact else c.name.lower()), c.ft) for c in table.columns
    }


class TxnWriter:
    def __init__(
        self, tso: Tso, pumps: BinlogWriter, catalog: PumpCatalog, *, window: int = 128
    ) -> None:
        self._tso = tso
        self._pumps = pumps
        self._catalog = catalog
        self._window = window

    async def write(self, txns: Sequence[Txn]) -> None:
        """Write the Txns in order (checkpoint-only markers write nothing)."""
        run: list[Txn] = []
        for txn in txns:
            if txn.ddl is not None:
                await self._dml(run)
                run = []
                await self._ddl(txn.ddl)
            elif txn.rows:
                run.append(txn)
                if len(run) >= self._window:
                    await self._dml(run)
                    run = []
        await self._dml(run)

    # -- encoding -------------------------------------------------------------

    async def _tables(self, txn: Txn) -> tuple[int, dict[tuple[str, str], Table]]:
        """The txn's tables as registered, and the schema version that has them all."""
        infos: dict[tuple[str, str], SinkTable] = {}
        for change in txn.rows:
            name = (change.table.schema.lower(), change.table.table.lower())
            seen = infos.setdefault(name, change.table)
            if seen is not change.table and seen != change.table:
                raise SinkError(f"txn {txn.commit_ts}: two layouts of {seen.qualified}")
        while True:
            version = self._catalog.version
            tables = {n: await self._catalog.resolve(t) for n, t in infos.items()}
            if self._catalog.version == version:
                return version, tables

    async def _encode(self, txn: Txn) -> tuple[int, MutationBuilder]:
        version, tables = await self._tables(txn)
        builder = MutationBuilder()
        for change in txn.rows:
            table = tables[(change.table.schema.lower(), change.table.table.lower())]
            try:
                _add(builder, table, change)
            except (CodecError, ValueError, TypeError, ArithmeticError) as e:
                raise SinkError(
                    f"txn {txn.commit_ts}: a {change.kind.value} on {table.qualified}: {e}"
                ) from e
        return version, builder

    # -- writing --------------------------------------------------------------

    async def _ts(self) -> int:
        try:
            return await self._tso.get_ts()
        except TsoError as e:
            raise _mapped(e, "getting a timestamp") from e

    async def _prewrite(self, start_ts: int, value: bytes, key: bytes, nowhere: set[int]) -> None:
        """``nowhere`` collects the start ts of a failed prewrite that no pump may hold."""
        try:
            await self._pumps.prewrite(start_ts, value, key)
        except PumpClientError as e:
            if not e.maybe_stored:
                nowhere.add(start_ts)
            raise _mapped(e, f"prewrite of {start_ts}") from e

    async def _commit(self, start_ts: int, commit_ts: int) -> None:
        try:
            await self._pumps.commit(start_ts, commit_ts)
        except PumpClientError as e:
            raise _mapped(e, f"commit of {start_ts} at {commit_ts}") from e

    async def _rollback(self, start_ts_list: list[int]) -> None:
        """Best effort: the pump client sends each rollback where its prewrite went (or may
        have gone); a rollback that fails leaves the pump to time the prewrite out."""
        if not start_ts_list:
            return
        for start_ts in start_ts_list:
            with contextlib.suppress(PumpClientError):
                await self._pumps.rollback(start_ts)
        log.info("rolled back %d transactions after a failure", len(start_ts_list))

    async def _all(self, what: str, aws: list[Coroutine[Any, Any, T]]) -> list[T]:
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(a, name=f"pump-sink-{what}-{i}") for i, a in enumerate(aws)]
        except ExceptionGroup as eg:
            first = eg.exceptions[0]
            retriable = all(isinstance(e, TributaryError) and e.retriable for e in eg.exceptions)
            raise SinkError(f"{first}", retriable=retriable) from eg
        return [t.result() for t in tasks]

    async def _dml(self, txns: list[Txn]) -> None:
        if not txns:
            return
        built = [await self._encode(t) for t in txns]
        starts = await self._all("start-ts", [self._ts() for _ in built])
        nowhere: set[int] = set()
        try:
            await self._all(
                "prewrite",
                [
                    self._prewrite(s, b.encode(v), b.first_key, nowhere)
                    for s, (v, b) in zip(starts, built, strict=True)
                ],
            )
            commits = sorted(await self._all("commit-ts", [self._ts() for _ in built]))
        except BaseException:
            # A prewrite stored, cancelled unanswered or failed unanswered may be held.
            await self._rollback([s for s in starts if s not in nowhere])
            raise
        pairs = zip(starts, commits, strict=True)
        await self._all("commit", [self._commit(s, c) for s, c in pairs])
        log.debug("wrote %d transactions up to commit ts %d", len(txns), commits[-1])

    async def _ddl(self, ddl: Ddl) -> None:
        job = await self._catalog.record_ddl(ddl)
        start_ts = await self._ts()
        try:
            await self._pumps.prewrite(
                start_ts, b"", ddl_query=ddl.query.encode(), ddl_job_id=job.id
            )
        except PumpClientError as e:
            if e.maybe_stored:  # a pump whose answer was lost may hold it: roll it back there
                await self._rollback([start_ts])
            raise _mapped(e, f"DDL binlog of job {job.id}") from e
        try:
            commit_ts = await self._ts()
        except BaseException:
            await self._rollback([start_ts])
            raise
        await self._commit(start_ts, commit_ts)
        log.info("DDL job %d at commit ts %d: %s", job.id, commit_ts, ddl.query)


def _add(builder: MutationBuilder, table: Table, change: RowChange) -> None:
    values = _typed_row(table, change.values)
    if change.kind is RowKind.INSERT:
        builder.insert(table, values)
    elif change.kind is RowKind.DELETE:
        builder.delete(table, values)
    else:
        assert change.old_values is not None  # RowChange checks it
        builder.update(table, _typed_row(table, change.old_values), values)
