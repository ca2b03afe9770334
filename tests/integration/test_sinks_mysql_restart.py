"""The MySQL sink against a downstream that goes away: restarts between and during batches, a
server that stays down, a killed server in the middle of a batch, a cancelled apply.

Each test owns its server (``mariadb_instance``), which it stops, kills and starts again on
the same port and data directory.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.mysql.config import parse_url
from tributary.sinks.mysql.sink import MysqlSink, open_url

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]

MODES = {"consistent": "consistent=true", "parallel": "consistent=false&worker-count=3"}
T = TableInfo.build("shop", "t", [("id", "int"), ("v", "varchar(20)")], ["id"])
SETUP = [
    Txn(1, ddl=Ddl("shop", "CREATE DATABASE shop")),
    Txn(2, ddl=Ddl("shop", "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")),
]


def url(server: MariaDBServer, query: str = "") -> str:
    return f"mysql://{server.user}:{server.password}@{server.host}:{server.port}/?{query}"


async def open_sink(server: MariaDBServer, query: str = "") -> MysqlSink:
    return await open_url(urlsplit(url(server, query)), SinkOptions(cluster_id=1))


def batch(first_ts: int, first_id: int, txns: int, rows: int) -> list[Txn]:
    """``txns`` transactions of ``rows`` inserts each, ids counting up from ``first_id``."""
    out = []
    for i in range(txns):
        base = first_id + i * rows
        changes = tuple(RowChange.insert(T, {"id": base + j, "v": "x"}) for j in range(rows))
        out.append(Txn(first_ts + i, rows=changes))
    return out


async def count(server: MariaDBServer) -> int:
    [(n,)] = await server.query("SELECT COUNT(*) FROM shop.t")
    return int(n)


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_restart_between_batches(mariadb_instance: InstanceFactory, mode: str) -> None:
    server = mariadb_instance()
    async with await open_sink(server, MODES[mode]) as sink:
        await sink.apply([*SETUP, *batch(10, 0, 2, 50)])
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)
        await sink.apply(batch(20, 100, 2, 50))  # the old connections are dead: reconnect
        assert await sink.checkpoint() == 21
    assert await count(server) == 200


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_restart_during_a_batch(mariadb_instance: InstanceFactory, mode: str) -> None:
    server = mariadb_instance()
    async with await open_sink(server, MODES[mode]) as sink:
        await sink.apply(SETUP)
        big = batch(10, 0, 200, 100)
        applying = asyncio.create_task(sink.apply(big), name="apply-big-batch")
        await asyncio.sleep(0.05)
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)
        await asyncio.wait_for(applying, 60)
        assert await sink.checkpoint() == big[-1].commit_ts
    assert await count(server) == 20_000


async def test_a_server_that_stays_down_is_a_retriable_error(
    mariadb_instance: InstanceFactory,
) -> None:
    server = mariadb_instance()
    delays: list[float] = []

    async def sleep(seconds: float) -> None:  # no real waiting; record the backoff
        delays.append(seconds)

    config = parse_url(urlsplit(url(server, "retries=4")), SinkOptions(cluster_id=1))
    async with await MysqlSink.open(config, cluster_id=1, sleep=sleep) as sink:
        await sink.apply(SETUP)
        await asyncio.to_thread(server.stop)
        with pytest.raises(SinkError, match="failed 5 times") as e:
            await sink.apply(batch(10, 0, 1, 10))
        assert e.value.retriable
        assert delays == [0.1, 0.2, 0.4, 0.8]
        assert await sink.checkpoint() == 2
        await asyncio.to_thread(server.start)
        await sink.apply(batch(10, 0, 1, 10))  # back: the same batch goes through
        assert await sink.checkpoint() == 10
    assert await count(server) == 10
    with pytest.raises(SinkError) as e:  # opening needs the server too
        await asyncio.to_thread(server.stop)
        await MysqlSink.open(config, cluster_id=1, sleep=sleep)
    assert e.value.retriable


async def test_a_killed_server_never_shows_half_a_batch(mariadb_instance: InstanceFactory) -> None:
    """Consistent mode: kill -9 in the middle of big batches; after recovery the rows match
    the checkpoint exactly, and the next apply picks up from it."""
    server = mariadb_instance()
    async with await open_sink(server, "retries=0") as sink:
        await sink.apply(SETUP)
    rows, seen = 4000, set()
    for round_ in range(3):
        async with await open_sink(server, "retries=0") as sink:
            first_ts = (await sink.checkpoint() or 0) + 1
            first_id = await count(server)
            applying = asyncio.create_task(
                sink.apply(batch(first_ts, first_id, 5, rows)), name="apply-before-kill"
            )
            await asyncio.sleep(0.01 * round_)
            await asyncio.to_thread(server.kill)
            outcome = await asyncio.gather(applying, return_exceptions=True)
            seen.add(type(outcome[0]).__name__)
        await asyncio.to_thread(server.start)
        async with await open_sink(server) as sink:
            checkpoint = await sink.checkpoint()
            assert checkpoint is not None
            applied_txns = checkpoint - 2 if checkpoint > 2 else 0
            assert await count(server) == applied_txns * rows  # whole transactions only
    assert "SinkError" in seen  # at least one kill hit a batch in flight


async def test_a_cancelled_apply_leaves_a_usable_sink(mariadb_instance: InstanceFactory) -> None:
    server = mariadb_instance()
    async with await open_sink(server) as sink:
        await sink.apply(SETUP)
        big = batch(10, 0, 50, 2000)  # 100,000 rows: still running after 50 ms
        applying = asyncio.create_task(sink.apply(big), name="apply-to-cancel")
        await asyncio.sleep(0.05)
        applying.cancel()
        with pytest.raises(asyncio.CancelledError):
            await applying
        assert await count(server) == 0  # rolled back with the dropped connection
        await sink.apply(big)
        assert await sink.checkpoint() == big[-1].commit_ts
    assert await count(server) == 100_000
