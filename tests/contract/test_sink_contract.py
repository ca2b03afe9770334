"""One contract for ``sinks.Sink``, run against every implementation.

Every sink: checkpoint is None before the first batch and the last commit ts after one; replays at
or below the checkpoint are skipped; a batch out of commit order fails and changes nothing.
Sinks whose rows can be read back (SQL sinks) also: the rows are there; a batch that fails part
way leaves neither its rows nor the checkpoint, and its error names the failing transaction's
commit ts; safe mode turns duplicate inserts into replaces.
Persistent sinks keep checkpoint and rows across a reopen. The batches here have no DDL next to
rows, which a MySQL downstream could not roll back.

The implementations: ``sqlite://`` (a file), ``mysql://`` (a real MariaDB), ``tidb://`` (the
MySQL sink on a real tidb-server, binlog off, one per module: its optimistic transactions check
unique keys only at COMMIT), ``file://`` (binlog files in a directory), ``pump://`` (a real
pump and etcd, in this event loop), ``print://`` (stdout) and ``blackhole://``. Where they
differ the harness says so: only the SQL sinks can be read back and refuse a duplicate key
(the file and pump sinks append what they are given, as tidb-binlog's do); the file sink keeps
its checkpoint in its directory and the pump sink in etcd, so both are persistent; print and
blackhole keep theirs in memory.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import asyncmy
import pytest

from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.tidb import TidbServer, running_tidb
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import Sink, SinkError, SinkOptions
from tributary.sinks.mysql.sink import open_url as open_mysql
from tributary.sinks.schemes import open_sink

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]

ACCT = TableInfo.build(
    "shop", "acct", [("id", "int"), ("bal", "int"), ("name", "varchar(10)")], ["id"]
)
SETUP = [
    Txn(10, 9, ddl=Ddl("shop", "CREATE DATABASE shop")),
    Txn(
        11, 10, ddl=Ddl("shop", "CREATE TABLE acct (id INT PRIMARY KEY, bal INT, name VARCHAR(10))")
    ),
]


def row(id: int, bal: int, name: str | None = "n") -> dict[str, Any]:
    return {"id": id, "bal": bal, "name": name}


def ins(*rows: dict[str, Any]) -> tuple[RowChange, ...]:
    return tuple(RowChange.insert(ACCT, r) for r in rows)


Reader = Callable[[str, str], Awaitable[list[tuple[Any, ...]]]]


@dataclass
class Harness:
    """How to (re)open one downstream, and read a table back where the sink allows it."""

    open: Callable[..., AbstractAsyncContextManager[Sink]]  # open(safe_mode=False)
    read: Reader | None


def _sqlite(tmp_path: Path) -> Harness:
    path = tmp_path / "downstream.db"

    def open_(safe_mode: bool = False) -> AbstractAsyncContextManager[Sink]:
        return open_sink(f"sqlite://{path}", SinkOptions(cluster_id=42, safe_mode=safe_mode))

    async def read(schema: str, table: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as db:  # another connection: sees committed state only
            return db.execute(f'SELECT * FROM "{schema}__{table}" ORDER BY 1').fetchall()

    return Harness(open_, read)


def _blackhole(tmp_path: Path) -> Harness:
    def open_(safe_mode: bool = False) -> AbstractAsyncContextManager[Sink]:
        return open_sink("blackhole://", SinkOptions(cluster_id=42, safe_mode=safe_mode))

    return Harness(open_, None)


def _print(tmp_path: Path) -> Harness:
    def open_(safe_mode: bool = False) -> AbstractAsyncContextManager[Sink]:
        return open_sink("print://", SinkOptions(cluster_id=42, safe_mode=safe_mode))

    return Harness(open_, None)


def _file(tmp_path: Path) -> Harness:
    url = f"file://{tmp_path / 'binlogs'}?segment-size=4KiB"

    def open_(safe_mode: bool = False) -> AbstractAsyncContextManager[Sink]:
        return open_sink(url, SinkOptions(cluster_id=42, safe_mode=safe_mode))

    return Harness(open_, None)


async def _pump(tmp_path: Path, request: pytest.FixtureRequest, stack: AsyncExitStack) -> Harness:
    """A real pump (and etcd) for the sink to write into; the checkpoint is kept in etcd."""
    etcd: EtcdProcess = request.getfixturevalue("etcd")
    pump = await stack.enter_async_context(running_pump(pump_config(tmp_path, etcd.endpoint)))
    host = etcd.endpoint.removeprefix("http://")
    url = f"pump://{host}/?name=contract&cluster-id={pump.started.cluster_id}"

    def open_(safe_mode: bool = False) -> AbstractAsyncContextManager[Sink]:
        return open_sink(url, SinkOptions(cluster_id=pump.started.cluster_id, safe_mode=safe_mode))

    return Harness(open_, None)


def _mysql(tmp_path: Path, request: pytest.FixtureRequest) -> Harness:
    """A fresh database on the shared MariaDB server holds the checkpoint; ``shop`` is the
    server's own (dropped before and after)."""
    db: MariaDBDatabase = request.getfixturevalue("mariadb")
    drop_shop = functools.partial(db.server.admin, "DROP DATABASE IF EXISTS shop")
    drop_shop()
    request.addfinalizer(drop_shop)
    url = urlsplit(
        f"mysql://{db.user}:{db.password}@{db.host}:{db.port}/?checkpoint-schema={db.name}"
    )

    @asynccontextmanager
    async def open_(safe_mode: bool = False) -> AsyncIterator[Sink]:
        async with await open_mysql(url, SinkOptions(cluster_id=42, safe_mode=safe_mode)) as s:
            yield s

    async def read(schema: str, table: str) -> list[tuple[Any, ...]]:
        return await db.server.query(f"SELECT * FROM `{schema}`.`{table}` ORDER BY 1")

    return Harness(open_, read)


@pytest.fixture(scope="module")
def tidb_downstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidbServer]:
    """One tidb-server (binlog off) for the module's ``tidb`` cases."""
    with running_tidb(tmp_path_factory.mktemp("tidb")) as tidb:
        yield tidb


_tidb_cases = itertools.count()


async def _tidb_sql(tidb: TidbServer, sql: str) -> list[tuple[Any, ...]]:
    conn = await asyncmy.connect(host=tidb.host, port=tidb.port, user=tidb.user, autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute(sql)
            return [tuple(r) for r in await cur.fetchall()]
    finally:
        conn.close()


async def _tidb(tmp_path: Path, request: pytest.FixtureRequest, stack: AsyncExitStack) -> Harness:
    """The module's tidb-server through ``tidb://``; the checkpoint in a schema of the case's
    own, ``shop`` dropped before and after."""
    tidb: TidbServer = request.getfixturevalue("tidb_downstream")
    await _tidb_sql(tidb, "DROP DATABASE IF EXISTS shop")
    stack.push_async_callback(_tidb_sql, tidb, "DROP DATABASE IF EXISTS shop")
    url = f"tidb://root@{tidb.host}:{tidb.port}/?checkpoint-schema=cp{next(_tidb_cases)}"

    def open_(safe_mode: bool = False) -> AbstractAsyncContextManager[Sink]:
        return open_sink(url, SinkOptions(cluster_id=42, safe_mode=safe_mode))

    async def read(schema: str, table: str) -> list[tuple[Any, ...]]:
        return await _tidb_sql(tidb, f"SELECT * FROM `{schema}`.`{table}` ORDER BY 1")

    return Harness(open_, read)


HARNESSES: dict[str, Callable[..., Harness]] = {
    "sqlite": _sqlite,
    "blackhole": _blackhole,
    "print": _print,
    "file": _file,
    "mysql": _mysql,
}
# harnesses set up in the test's event loop (a pump of the test's own, TiDB's databases)
RUNNING = {"pump": _pump, "tidb": _tidb}
READABLE = ["sqlite", "mysql", "tidb"]  # rows read back; a duplicate key fails the batch
PERSISTENT = ["sqlite", "mysql", "tidb", "file", "pump"]  # the checkpoint survives a reopen
WITH_REQUEST = {"mysql"}  # harnesses that take fixtures of their own through the request


async def _harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    if request.param in RUNNING:
        async with AsyncExitStack() as stack:
            yield await RUNNING[request.param](tmp_path, request, stack)
    elif request.param in WITH_REQUEST:
        yield HARNESSES[request.param](tmp_path, request)
    else:
        yield HARNESSES[request.param](tmp_path)


@pytest.fixture(params=sorted([*HARNESSES, *RUNNING]))
async def any_sink(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    async for harness in _harness(request, tmp_path):
        yield harness


@pytest.fixture(params=READABLE)
async def readable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    async for harness in _harness(request, tmp_path):
        yield harness


@pytest.fixture(params=PERSISTENT)
async def persistent(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    async for harness in _harness(request, tmp_path):
        yield harness


@pytest.fixture
async def sink(any_sink: Harness) -> AsyncIterator[Sink]:
    async with any_sink.open() as s:
        yield s


async def test_checkpoint_follows_the_last_applied_commit_ts(sink: Sink) -> None:
    assert await sink.checkpoint() is None
    await sink.apply(SETUP)
    assert await sink.checkpoint() == 11
    await sink.apply([Txn(20, 15, rows=ins(row(1, 10))), Txn(30, 25, rows=ins(row(2, 20)))])
    assert await sink.checkpoint() == 30
    await sink.apply([])
    await sink.apply([Txn(35)])  # checkpoint-only marker (a filtered stretch)
    assert await sink.checkpoint() == 35


async def test_replays_at_or_below_the_checkpoint_are_skipped(sink: Sink) -> None:
    batch = [*SETUP, Txn(20, rows=ins(row(1, 10)))]
    await sink.apply(batch)
    # Plain INSERTs again: a sink that re-applied them would hit the primary key.
    await sink.apply([*batch, Txn(30, rows=ins(row(2, 20)))])
    assert await sink.checkpoint() == 30


async def test_a_batch_out_of_order_changes_nothing(sink: Sink) -> None:
    await sink.apply(SETUP)
    with pytest.raises(SinkError) as e:
        await sink.apply([Txn(30, rows=ins(row(1, 1))), Txn(20, rows=ins(row(2, 2)))])
    assert not e.value.retriable
    assert await sink.checkpoint() == 11


async def test_a_closed_sink_refuses_batches(any_sink: Harness) -> None:
    async with any_sink.open() as s:
        await s.apply(SETUP)
    with pytest.raises(SinkError):
        await s.apply([Txn(20)])


async def test_rows_read_back(readable: Harness) -> None:
    assert readable.read is not None
    async with readable.open() as s:
        await s.apply(SETUP)
        await s.apply(
            [
                Txn(20, rows=ins(row(1, 10, "a"), row(2, 20, None), row(3, 30))),
                Txn(
                    30,
                    rows=(
                        RowChange.update(ACCT, row(1, 10, "a"), row(1, 15, "a")),
                        RowChange.update(ACCT, row(3, 30), row(4, 30)),  # the key changes
                        RowChange.delete(ACCT, row(2, 20, None)),
                    ),
                ),
            ]
        )
    assert await readable.read("shop", "acct") == [(1, 15, "a"), (4, 30, "n")]


async def test_a_failed_batch_leaves_neither_rows_nor_checkpoint(readable: Harness) -> None:
    assert readable.read is not None
    async with readable.open() as s:
        await s.apply([*SETUP, Txn(20, rows=ins(row(1, 10)))])
        good = Txn(40, rows=(*ins(row(5, 50)), RowChange.update(ACCT, row(1, 10), row(1, 11))))
        with pytest.raises(SinkError, match=r"commit ts 50\b"):  # the error names the culprit
            await s.apply([good, Txn(50, rows=ins(row(6, 60), row(1, 99)))])  # 1 exists
        assert await s.checkpoint() == 20
        assert await readable.read("shop", "acct") == [(1, 10, "n")]
        await s.apply([good, Txn(50, rows=ins(row(6, 60)))])  # still usable
        assert await s.checkpoint() == 50
    assert await readable.read("shop", "acct") == [(1, 11, "n"), (5, 50, "n"), (6, 60, "n")]


async def test_safe_mode_replaces_rows_that_are_already_there(readable: Harness) -> None:
    assert readable.read is not None
    async with readable.open() as s:
        await s.apply([*SETUP, Txn(20, rows=ins(row(1, 10), row(2, 20)))])
    async with readable.open(safe_mode=True) as s:
        await s.apply(
            [
                Txn(30, rows=ins(row(1, 11))),
                Txn(40, rows=(RowChange.update(ACCT, row(7, 0), row(2, 21)),)),  # old row absent
            ]
        )
    assert await readable.read("shop", "acct") == [(1, 11, "n"), (2, 21, "n")]


async def test_checkpoint_and_rows_survive_a_reopen(persistent: Harness) -> None:
    async with persistent.open() as s:
        await s.apply([*SETUP, Txn(20, rows=ins(row(1, 10)))])
        if persistent.read is not None:  # only the SQL sinks refuse the duplicate key of 40
            with pytest.raises(SinkError):
                await s.apply([Txn(30, rows=ins(row(2, 20))), Txn(40, rows=ins(row(1, 0)))])
    async with persistent.open() as s:
        assert await s.checkpoint() == 20
        await s.apply([Txn(30, rows=ins(row(2, 20)))])
    async with persistent.open() as s:
        assert await s.checkpoint() == 30
    if persistent.read is not None:
        assert await persistent.read("shop", "acct") == [(1, 10, "n"), (2, 20, "n")]
