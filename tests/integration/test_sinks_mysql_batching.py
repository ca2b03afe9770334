"""The MySQL sink sends a consistent-mode batch as multi-statement queries of bounded size: a
batch far larger than one query is applied whole, and a failure in a later query of the batch
leaves nothing of it (nor its checkpoint) behind."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.mysql.conn import MAX_QUERY
from tributary.sinks.mysql.sink import MysqlSink, open_url

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]

T = TableInfo.build("shop", "t", [("id", "int"), ("v", "varchar(2000)")], ["id"])
U = TableInfo.build("shop", "u", [("id", "int")], ["id"])
SETUP = [
    Txn(1, ddl=Ddl("shop", "CREATE DATABASE shop")),
    Txn(2, ddl=Ddl("shop", "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(2000))")),
    Txn(3, ddl=Ddl("shop", "CREATE TABLE u (id INT PRIMARY KEY)")),
]
ROWS = 3000  # of 2000 characters: 6 MB of values, more than MAX_QUERY


async def open_sink(server: MariaDBServer) -> MysqlSink:
    url = f"mysql://{server.user}:{server.password}@{server.host}:{server.port}/"
    return await open_url(urlsplit(url), SinkOptions(cluster_id=1))


def big(first_ts: int) -> list[Txn]:
    rows = [RowChange.insert(T, {"id": i, "v": f"{i:04d}" * 500}) for i in range(ROWS)]
    return [Txn(first_ts + i, rows=tuple(rows[i * 100 : i * 100 + 100])) for i in range(30)]


async def test_a_batch_larger_than_a_query_is_applied_whole(
    mariadb_instance: InstanceFactory,
) -> None:
    assert ROWS * 2000 > MAX_QUERY
    server = mariadb_instance()
    async with await open_sink(server) as sink:
        await sink.apply(SETUP)
        await sink.apply(big(10))
        assert await sink.checkpoint() == 39
    [(n, total)] = await server.query("SELECT COUNT(*), SUM(LENGTH(v)) FROM shop.t")
    assert (int(n), int(total)) == (ROWS, ROWS * 2000)


async def test_a_failure_in_a_later_query_leaves_nothing_of_the_batch(
    mariadb_instance: InstanceFactory,
) -> None:
    server = mariadb_instance()
    async with await open_sink(server) as sink:
        await sink.apply(SETUP)
        await server.execute("INSERT INTO shop.u VALUES (7)")  # the downstream diverged
        clash = Txn(40, rows=(RowChange.insert(U, {"id": 7}),))
        with pytest.raises(SinkError, match="commit ts 40"):
            await sink.apply([*big(10), clash])  # u's INSERT runs after t's 6 MB
        assert await sink.checkpoint() == 3
    [(n,)] = await server.query("SELECT COUNT(*) FROM shop.t")
    assert int(n) == 0
