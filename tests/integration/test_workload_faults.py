"""The workload's failure paths against a real MariaDB and a real pump: a COMMIT that fails
after the prewrite (the connection is killed) gives a rollback binlog, no commit binlog, no
upstream change, and the transfer is retried as a new transaction; a real deadlock between two
transfers costs one retry and no binlog at all."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.etcd import EtcdProcess
from tests.support.workload_cluster import (
    Cluster,
    assert_same_contents,
    cluster,
    pull_all,
    replicate,
)
from tributary.sql import Dialect, Statement
from tributary.wire.binlog import Binlog
from tributary.workload import Bank, total_balance
from tributary.workload.bank import OPENING
from tributary.workload.rows import Row
from tributary.workload.runner import build_env
from tributary.workload.txn import TxnContext
from tributary.workload.upstream_mysql import MysqlSession, MysqlUpstream

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.etcd


class RecordingWriter:
    """The pump client, with a record of every binlog the workload asked it to write."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.prewrites: list[int] = []
        self.commits: dict[int, int] = {}
        self.rollbacks: list[int] = []

    async def prewrite(
        self,
        start_ts: int,
        prewrite_value: bytes,
        prewrite_key: bytes = b"",
        ddl_query: bytes = b"",
        ddl_job_id: int = 0,
    ) -> None:
        await self._client.prewrite(start_ts, prewrite_value, prewrite_key, ddl_query, ddl_job_id)
        self.prewrites.append(start_ts)

    async def commit(self, start_ts: int, commit_ts: int) -> None:
        await self._client.commit(start_ts, commit_ts)
        self.commits[start_ts] = commit_ts

    async def rollback(self, start_ts: int) -> None:
        await self._client.rollback(start_ts)
        self.rollbacks.append(start_ts)


class KilledSession:
    """A session whose connection the server kills (``KILL <thread>``) just before COMMIT."""

    def __init__(self, session: MysqlSession, kill: Any) -> None:
        self._session = session
        self._kill = kill

    async def begin(self) -> None:
        await self._session.begin()

    async def commit(self) -> None:
        await self._kill(f"KILL {self._session.thread_id}")
        await self._session.commit()

    async def rollback(self) -> None:
        await self._session.rollback()

    async def query(self, stmt: Statement) -> list[tuple[Any, ...]]:
        return await self._session.query(stmt)

    async def execute(self, stmt: Statement) -> int:
        return await self._session.execute(stmt)


class KillOnce:
    """The real MariaDB upstream, except that the next session, once armed, gets killed."""

    def __init__(self, real: MysqlUpstream, kill: Any) -> None:
        self._real = real
        self._kill = kill
        self.armed = False

    @property
    def dialect(self) -> Dialect:
        return self._real.dialect

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        async with self._real.session() as s:
            if self.armed:
                self.armed = False
                yield KilledSession(s, self._kill)
            else:
                yield s

    async def execute_ddl(self, schema: str, query: str) -> None:
        await self._real.execute_ddl(schema, query)

    async def close(self) -> None:
        await self._real.close()


async def balances(up: MysqlUpstream, schema: str) -> dict[int, int]:
    async with up.session() as s:
        rows = await s.query(Statement(f"SELECT id, balance FROM `{schema}`.accounts"))
    return {int(r[0]): int(r[1]) for r in rows}


async def check_pumps(
    c: Cluster, writer: RecordingWriter, up: MysqlUpstream, schema: str, tmp: Path
) -> None:
    """The pumps serve exactly the committed transactions; replaying them rebuilds upstream."""
    items = await pull_all(c, max(writer.commits.values()))
    assert {i.start_ts for i in items} == set(writer.commits)
    for item in items:
        assert Binlog().parse(item.payload).commit_ts == writer.commits[item.start_ts]
    await replicate(c, items, tmp / "down.db")
    assert await assert_same_contents(c, up, tmp / "down.db", schema) == 4


async def test_commit_failure_after_prewrite_writes_a_rollback_binlog(
    etcd: EtcdProcess, tmp_path: Path, mariadb: MariaDBDatabase
) -> None:
    bank = Bank(mariadb.name, accounts=4, max_amount=1)
    async with cluster(etcd, tmp_path, pumps=1) as c:
        real = await MysqlUpstream.connect(mariadb.server.dsn(), writers=2)
        up = KillOnce(real, mariadb.server.execute)
        writer = RecordingWriter(c.client)
        try:
            env = await build_env(up, writer, c.tso, c.history)
            await bank.setup(env)
            before = dict(env.stats.as_dict())
            up.armed = True
            await bank.step(env, random.Random(7))

            assert len(writer.rollbacks) == 1
            killed = writer.rollbacks[0]
            assert killed in writer.prewrites and killed not in writer.commits
            stats = env.stats
            assert (stats.rollbacks, stats.retries) == (1, 1)
            assert stats.commits == before["commits"] + 1  # the retry, as a new transaction
            moved = {
                i: b - OPENING
                for i, b in (await balances(real, bank.schema)).items()
                if b != OPENING
            }
            assert sorted(moved.values()) == [-1, 1]  # one transfer of 1, not two
            assert await total_balance(real, bank.schema) == bank.expected_total
            assert c.client.pending_commits == 0
            await check_pumps(c, writer, real, bank.schema, tmp_path)
        finally:
            await up.close()


async def test_a_deadlock_is_retried_as_a_new_transaction(
    etcd: EtcdProcess, tmp_path: Path, mariadb: MariaDBDatabase
) -> None:
    bank = Bank(mariadb.name, accounts=4)
    async with cluster(etcd, tmp_path, pumps=1) as c:
        up = await MysqlUpstream.connect(mariadb.server.dsn(), writers=2)
        writer = RecordingWriter(c.client)
        try:
            env = await build_env(up, writer, c.tso, c.history)
            await bank.setup(env)
            table = env.catalog.table(bank.schema, "accounts")
            assert table is not None
            holding = {1: asyncio.Event(), 2: asyncio.Event()}
            attempts = {1: 0, 2: 0}

            def transfer(first: int, second: int) -> Any:
                async def body(ctx: TxnContext) -> None:
                    attempts[first] += 1
                    src = await ctx.get(table, {"id": first})
                    holding[first].set()
                    await holding[second].wait()  # both hold one row: each waits for the other
                    dst = await ctx.get(table, {"id": second})
                    assert src is not None and dst is not None
                    await ctx.update(table, src, moved(src, -10))
                    await ctx.update(table, dst, moved(dst, +10))

                return body

            prewrites_before = len(writer.prewrites)
            retries_before = env.stats.retries
            done = await asyncio.gather(
                env.txns.run([table.id], transfer(1, 2)), env.txns.run([table.id], transfer(2, 1))
            )
            assert list(done) == [True, True]
            assert sorted(attempts.values()) == [1, 2]  # the deadlock victim ran again
            assert env.stats.retries == retries_before + 1 and env.stats.rollbacks == 0
            assert len(writer.prewrites) == prewrites_before + 2  # the victim wrote no binlog
            assert writer.rollbacks == []
            assert (await balances(up, bank.schema))[1] == OPENING  # -10 +10
            await check_pumps(c, writer, up, bank.schema, tmp_path)
        finally:
            await up.close()


def moved(row: Row, amount: int) -> Row:
    balance = row["balance"]
    assert isinstance(balance, int)
    return {**row, "balance": balance + amount}
