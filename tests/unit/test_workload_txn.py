"""The transaction protocol of the workload (``workload.txn.Executor``) step by step, on a real
SQLite upstream with fakes of our own ports (TSO, binlog writer) that log every call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.workload_fakes import SPEC, Events, LoggingTso, LoggingWriter
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import KvDdlHistory
from tributary.pumpclient import PumpClientError
from tributary.sql import Dialect, Statement
from tributary.tidbcodec import IntDatum, decode_updated_row
from tributary.wire.binlog import PrewriteValue
from tributary.workload import columns
from tributary.workload.catalog import Table
from tributary.workload.env import Env
from tributary.workload.errors import Conflict, ConnectionLost, UpstreamError, WorkloadError
from tributary.workload.runner import build_env
from tributary.workload.txn import TxnContext
from tributary.workload.upstream import Session
from tributary.workload.upstream_sqlite import SqliteUpstream


class LoggingSession:
    def __init__(self, real: Session, owner: LoggingUpstream) -> None:
        self._real = real
        self._owner = owner

    async def begin(self) -> None:
        await self._real.begin()

    async def commit(self) -> None:
        if self._owner.commit_errors:
            self._owner.events.append(("COMMIT-failed",))
            await self._real.rollback()  # what the server does when the connection drops
            raise self._owner.commit_errors.pop(0)
        await self._real.commit()
        self._owner.events.append(("COMMIT",))

    async def rollback(self) -> None:
        await self._real.rollback()
        self._owner.events.append(("ROLLBACK",))

    async def query(self, stmt: Statement) -> list[tuple[Any, ...]]:
        return await self._real.query(stmt)

    async def execute(self, stmt: Statement) -> int:
        return await self._real.execute(stmt)


class LoggingUpstream:
    """A real SQLite upstream whose sessions log COMMIT/ROLLBACK and can fail a COMMIT."""

    def __init__(self, real: SqliteUpstream, events: Events) -> None:
        self._real = real
        self.events = events
        self.commit_errors: list[UpstreamError] = []

    @property
    def dialect(self) -> Dialect:
        return self._real.dialect

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        async with self._real.session() as s:
            yield LoggingSession(s, self)

    async def execute_ddl(self, schema: str, query: str) -> None:
        await self._real.execute_ddl(schema, query)

    async def close(self) -> None:
        await self._real.close()


class Harness:
    def __init__(
        self,
        env: Env,
        events: Events,
        tso: LoggingTso,
        writer: LoggingWriter,
        upstream: LoggingUpstream,
        table: Table,
    ) -> None:
        self.env, self.events, self.tso, self.writer = env, events, tso, writer
        self.upstream, self.table = upstream, table

    async def rows(self) -> list[tuple[Any, ...]]:
        async with self.upstream.session() as s:
            return await s.query(Statement('SELECT id, v FROM "db__t" ORDER BY id'))


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    events: Events = []
    real = await SqliteUpstream.open(tmp_path / "up.db")
    upstream = LoggingUpstream(real, events)
    tso, writer = LoggingTso(events), LoggingWriter(events)
    try:
        env = await build_env(
            upstream,
            writer,
            tso,
            KvDdlHistory(MemoryKv()),
            record_latency=True,
            wall_clock=lambda: 1234.5,
        )
        await env.ddl.create_database("db")
        table = await env.ddl.create_table("db", SPEC)
        h = Harness(env, events, tso, writer, upstream, table)

        async def seed(ctx: TxnContext) -> None:
            await ctx.insert(table, [{"id": 1, "v": 10}, {"id": 2, "v": 20}])

        assert await env.txns.run([table.id], seed)
        events.clear()
        yield h
    finally:
        await upstream.close()


def add_to_first(h: Harness, amount: int) -> Any:
    async def body(ctx: TxnContext) -> None:
        row = await ctx.get(h.table, {"id": 1})
        assert row is not None
        v = row["v"]
        assert isinstance(v, int)
        await ctx.update(h.table, row, {**row, "v": v + amount})

    return body


async def test_a_transaction_writes_prewrite_then_takes_commit_ts_then_commits(h: Harness) -> None:
    assert await h.env.txns.run([h.table.id], add_to_first(h, 5))
    (_, start), prewrite, (_, commit_ts), upstream_commit, commit = h.events
    assert prewrite == ("prewrite", start, 0, b"")
    assert commit_ts > start and upstream_commit == ("COMMIT",)
    assert commit == ("commit", start, commit_ts)
    value = PrewriteValue().parse(h.writer.values[start])
    assert value.schema_version == h.env.catalog.version == 2
    (mutation,) = value.mutations
    assert mutation.table_id == h.table.id and len(mutation.updated_rows) == 1
    old, new = decode_updated_row(mutation.updated_rows[0])
    assert (old[2], new[2]) == (IntDatum(10), IntDatum(15))
    assert await h.rows() == [(1, 15), (2, 20)]
    stats = h.env.stats
    assert (stats.commits, stats.rows, stats.max_commit_ts) == (2, 3, commit_ts)
    assert stats.latencies[-1].commit_ts == commit_ts
    assert stats.latencies[-1].committed_at == 1234.5


async def test_a_failed_commit_after_the_prewrite_writes_a_rollback_and_retries(h: Harness) -> None:
    h.upstream.commit_errors.append(ConnectionLost("connection killed"))
    assert await h.env.txns.run([h.table.id], add_to_first(h, 5))
    kinds = [e[0] for e in h.events]
    assert kinds == [
        "ts", "prewrite", "ts", "COMMIT-failed", "ROLLBACK", "rollback",  # attempt 1
        "ts", "prewrite", "ts", "COMMIT", "commit",  # attempt 2: a new transaction
    ]  # fmt: skip
    first, second = h.events[1][1], h.events[6][1]
    assert h.events[5] == ("rollback", first) and second > first
    assert await h.rows() == [(1, 15), (2, 20)]  # applied once
    assert (h.env.stats.rollbacks, h.env.stats.retries) == (1, 1)


async def test_no_commit_ts_means_rollback_binlog_and_no_upstream_commit(h: Harness) -> None:
    h.tso.failures = 0
    real_get = h.tso.get_ts
    calls = 0

    async def second_call_fails() -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            h.tso.failures = 1
        return await real_get()

    h.tso.get_ts = second_call_fails  # type: ignore[method-assign]
    assert await h.env.txns.run([h.table.id], add_to_first(h, 5))
    kinds = [e[0] for e in h.events]
    assert kinds[:5] == ["ts", "prewrite", "ts-failed", "ROLLBACK", "rollback"]
    assert "COMMIT" not in kinds[:5] and kinds[-2:] == ["COMMIT", "commit"]
    assert await h.rows() == [(1, 15), (2, 20)]


async def test_a_refused_prewrite_rolls_back_upstream_and_writes_no_c_binlog(h: Harness) -> None:
    h.writer.prewrite_error = PumpClientError("no pump", retriable=False)
    with pytest.raises(WorkloadError, match="prewrite") as raised:
        await h.env.txns.run([h.table.id], add_to_first(h, 5))
    assert not raised.value.retriable
    assert [e[0] for e in h.events] == ["ts", "ROLLBACK"]
    assert await h.rows() == [(1, 10), (2, 20)]


async def test_a_prewrite_that_may_be_stored_somewhere_is_rolled_back(h: Harness) -> None:
    h.writer.prewrite_error = PumpClientError("lost answers", retriable=False, maybe_stored=True)
    with pytest.raises(WorkloadError, match="prewrite"):
        await h.env.txns.run([h.table.id], add_to_first(h, 5))
    assert [e[0] for e in h.events] == ["ts", "ROLLBACK", "rollback"]
    assert await h.rows() == [(1, 10), (2, 20)]


async def test_a_conflict_before_the_prewrite_is_retried_without_binlogs(h: Harness) -> None:
    attempts = 0

    async def body(ctx: TxnContext) -> None:
        nonlocal attempts
        attempts += 1
        await add_to_first(h, 1)(ctx)
        if attempts == 1:
            raise Conflict("deadlock")

    assert await h.env.txns.run([h.table.id], body)
    kinds = [e[0] for e in h.events]
    assert kinds == ["ts", "ROLLBACK", "ts", "prewrite", "ts", "COMMIT", "commit"]
    assert await h.rows() == [(1, 11), (2, 20)]
    assert h.env.stats.retries == 1 and h.env.stats.rollbacks == 0


async def test_empty_and_aborted_transactions_write_no_binlog(h: Harness) -> None:
    async def nothing(ctx: TxnContext) -> None:
        await ctx.get(h.table, {"id": 1})

    async def gone(ctx: TxnContext) -> None:
        ctx.table(999)

    assert await h.env.txns.run([h.table.id], nothing)
    assert not await h.env.txns.run([h.table.id], gone)
    assert [e[0] for e in h.events] == ["ts", "COMMIT", "ts", "ROLLBACK"]
    assert h.env.stats.aborted == 1


async def test_a_ddl_waits_for_the_transactions_on_its_table(h: Harness) -> None:
    inside, release = asyncio.Event(), asyncio.Event()

    async def slow(ctx: TxnContext) -> None:
        await add_to_first(h, 1)(ctx)
        inside.set()
        await release.wait()

    txn = asyncio.create_task(h.env.txns.run([h.table.id], slow), name="test-slow-txn")
    await inside.wait()
    ddl = asyncio.create_task(
        h.env.ddl.add_column(h.table, columns.int_("w", not_null=True, default="7")),
        name="test-ddl",
    )
    for _ in range(20):
        await asyncio.sleep(0)
    assert not ddl.done()
    release.set()
    assert await txn
    await ddl
    kinds = [e[0] for e in h.events]
    assert kinds.index("commit") < kinds.index("prewrite", kinds.index("commit"))
    assert h.env.catalog.table("db", "t").info.column("w") is not None  # type: ignore[union-attr]
