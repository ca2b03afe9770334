"""The MySQL sink sends a consistent-mode batch as multi-statement queries of bounded size: a
batch far larger than one query is applied whole, and a failure in a later query of the batch
leaves nothing of it (nor its checkpoint) behind. Rows of two schema versions of a table (a
late transaction after an ALTER) are applied each with its own columns, in both modes."""

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


async def open_sink(server: MariaDBServer, options: str = "") -> MysqlSink:
    url = f"mysql://{server.user}:{server.password}@{server.host}:{server.port}/{options}"
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


# TiDB's metadata lock lets a transaction that started at the schema version before an ALTER
# (4) commit after the ALTER's binlog (5): its rows come without the column the ALTER added.
OLD = TableInfo.build("tc", "load1", [("id", "int"), ("v", "int")], ["id"])
NEW = TableInfo.build("tc", "load1", [("id", "int"), ("v", "int"), ("c", "int")], ["id"])
LOAD1 = [
    Txn(1, ddl=Ddl("tc", "CREATE DATABASE tc"), schema_version=1),
    Txn(2, ddl=Ddl("tc", "CREATE TABLE load1 (id INT PRIMARY KEY, v INT)"), schema_version=2),
    Txn(3, rows=(RowChange.insert(OLD, {"id": 9, "v": 9}),), schema_version=2),
    Txn(4, ddl=Ddl("tc", "ALTER TABLE load1 ADD COLUMN c INT DEFAULT 0"), schema_version=5),
]


def late_batch() -> list[Txn]:
    """A new-version row, a late transaction writing another row and the same key, another
    new-version row, and a second late transaction last (as in the report: the batch's last
    definition of the table is the old one)."""
    late = (
        RowChange.insert(OLD, {"id": 2, "v": 2}),
        RowChange.update(OLD, {"id": 1, "v": 1}, {"id": 1, "v": 7}),
        RowChange.update(OLD, {"id": 9, "v": 9}, {"id": 9, "v": 10}),
    )
    return [
        Txn(10, rows=(RowChange.insert(NEW, {"id": 1, "v": 1, "c": 5}),), schema_version=5),
        Txn(11, rows=late, schema_version=4),
        Txn(12, rows=(RowChange.insert(NEW, {"id": 3, "v": 3, "c": 6}),), schema_version=5),
        Txn(13, rows=(RowChange.insert(OLD, {"id": 4, "v": 4}),), schema_version=4),
    ]


async def load1_rows(server: MariaDBServer) -> list[tuple[int, ...]]:
    rows = await server.query("SELECT id, v, c FROM tc.load1 ORDER BY id")
    return [tuple(int(x) for x in r) for r in rows]


@pytest.mark.parametrize("options", ["", "?consistent=false&worker-count=2"])
async def test_a_late_transaction_after_an_alter_is_applied_with_its_own_columns(
    mariadb_instance: InstanceFactory, options: str
) -> None:
    server = mariadb_instance()
    async with await open_sink(server, options) as sink:
        await sink.apply(LOAD1)
        await sink.apply(late_batch())  # one batch: a ValueError before, at every restart
        assert await sink.checkpoint() == 13
    # c keeps what the new version wrote (1, 3), the default where the old one inserted (2, 4)
    assert await load1_rows(server) == [(1, 7, 5), (2, 2, 0), (3, 3, 6), (4, 4, 0), (9, 10, 0)]


async def test_a_late_transaction_alone_after_a_restart_keeps_the_new_column(
    mariadb_instance: InstanceFactory,
) -> None:
    server = mariadb_instance()
    async with await open_sink(server) as sink:
        await sink.apply(LOAD1)
        new = RowChange.update(NEW, {"id": 9, "v": 9, "c": 0}, {"id": 9, "v": 9, "c": 5})
        await sink.apply([Txn(10, rows=(new,), schema_version=5)])
    async with await open_sink(server) as sink:  # the newest version seen is in the checkpoint
        late = RowChange.update(OLD, {"id": 9, "v": 9}, {"id": 9, "v": 10})
        await sink.apply([Txn(11, rows=(late,), schema_version=4)])
        assert await sink.checkpoint() == 11
    # A REPLACE of the late row would have put c back to its default.
    assert await load1_rows(server) == [(9, 10, 5)]
