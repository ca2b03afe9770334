"""A DDL runs once on a real MariaDB (``sinks.mysql.ddlmark``): a sink that ran an unnamed
``ADD INDEX`` and crashed before its checkpoint replays the batch and the index is there once;
a run with a checkpoint row of its own (a spread changefeed's next capture) skips what the
DDL record says ran; a checkpoint row removed by hand starts afresh.

The "crash" calls the sink's pieces directly (record started, DDL run, no checkpoint) and
drops the connection, as a process killed at that point leaves the downstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.mysql.apply import run_ddl, save_alone
from tributary.sinks.mysql.conn import connect
from tributary.sinks.mysql.ddlmark import mark_save, mark_table
from tributary.sinks.mysql.sink import MysqlSink, open_url

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]


async def open_sink(
    db: MariaDBDatabase, *, cluster_id: int = 1, ddl_key: int | None = None, safe: bool = False
) -> MysqlSink:
    url = f"mysql://{db.user}:{db.password}@{db.host}:{db.port}/?checkpoint-schema={db.name}"
    options = SinkOptions(cluster_id=cluster_id, safe_mode=safe, ddl_key=ddl_key)
    return await open_url(urlsplit(url), options)


def batch(db: MariaDBDatabase) -> list[Txn]:
    t = TableInfo.build(db.name, "t", [("id", "int"), ("v", "int")], ["id"])
    return [
        Txn(2, 1, ddl=Ddl(db.name, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "t")),
        Txn(3, 2, ddl=Ddl(db.name, "ALTER TABLE t ADD INDEX (v)", "t")),
        Txn(4, 3, rows=(RowChange.insert(t, {"id": 1, "v": 10}),)),
    ]


async def indexes_on_v(db: MariaDBDatabase) -> list[str]:
    rows = await db.query(
        "SELECT index_name FROM information_schema.statistics "
        "WHERE table_schema = %s AND table_name = 't' AND column_name = 'v'",
        (db.name,),
    )
    return sorted(str(r[0]) for r in rows)


async def record(db: MariaDBDatabase, key: int = 1) -> tuple[int, int] | None:
    rows = await db.query(
        f"SELECT ddl_ts, finished FROM {mark_table('checkpoint')} WHERE ddl_key = %s", (key,)
    )
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


async def crash_after_ddl(db: MariaDBDatabase, sink: MysqlSink, txn: Txn) -> None:
    """What a sink does for ``txn`` up to the DDL, then dies: no finished record, no
    checkpoint."""
    assert txn.ddl is not None
    conn = await connect(sink.config.connect)
    try:
        start = mark_save(
            1,
            txn.commit_ts,
            txn.ddl,
            finished=False,
            schema=db.name,
            table=mark_table("checkpoint"),
        )
        await save_alone(conn, start)
        await run_ddl(conn, txn)
    finally:
        conn.close()


async def test_an_unnamed_index_replayed_after_a_crash_is_there_once(
    mariadb: MariaDBDatabase,
) -> None:
    first = batch(mariadb)
    async with await open_sink(mariadb) as sink:
        await sink.apply(first[:1])
        await crash_after_ddl(mariadb, sink, first[1])
    assert await indexes_on_v(mariadb) == ["v"]
    assert await record(mariadb) == (3, 0)
    async with await open_sink(mariadb) as sink:  # safe mode off: the record tells
        assert await sink.checkpoint() == 2
        await sink.apply(first)
        assert await sink.checkpoint() == 4
    assert await indexes_on_v(mariadb) == ["v"]
    assert await record(mariadb) == (3, 1)
    assert await mariadb.query("SELECT id, v FROM t") == [(1, 10)]


async def test_safe_mode_skips_an_unnamed_index_that_is_there(mariadb: MariaDBDatabase) -> None:
    """No record of the DDL (a downstream written before the record existed): safe mode, on
    after every start, compares the indexes."""
    first = batch(mariadb)
    async with await open_sink(mariadb) as sink:
        await sink.apply(first[:1])
        assert first[1].ddl is not None
        conn = await connect(sink.config.connect)
        try:
            await run_ddl(conn, first[1])
        finally:
            conn.close()
    async with await open_sink(mariadb, safe=True) as sink:
        await sink.apply(first)
    assert await indexes_on_v(mariadb) == ["v"]


async def test_the_ddl_record_skips_a_replay_by_another_run(mariadb: MariaDBDatabase) -> None:
    """Two runs with checkpoint rows of their own and one DDL key (a spread changefeed's
    capture and the one that takes ``#ddl`` over): the second skips what the first ran, and
    runs what comes after."""
    first = batch(mariadb)
    async with await open_sink(mariadb, cluster_id=11, ddl_key=7) as sink:
        await sink.apply(first)
    async with await open_sink(mariadb, cluster_id=12, ddl_key=7) as sink:
        assert await sink.checkpoint() is None
        more = Txn(5, 4, ddl=Ddl(mariadb.name, "ALTER TABLE t ADD INDEX (id, v)", "t"))
        await sink.apply([*first[:2], more])
        assert await sink.checkpoint() == 5
    assert await indexes_on_v(mariadb) == ["id", "v"]
    assert await record(mariadb, key=7) == (5, 1)


async def test_a_checkpoint_row_removed_by_hand_forgets_the_record(
    mariadb: MariaDBDatabase,
) -> None:
    first = batch(mariadb)
    async with await open_sink(mariadb) as sink:
        await sink.apply(first)
    await mariadb.execute("DROP TABLE t")
    await mariadb.execute("DELETE FROM checkpoint")
    async with await open_sink(mariadb) as sink:
        assert await record(mariadb) is None
        await sink.apply(first)
    assert await indexes_on_v(mariadb) == ["v"]
    assert await mariadb.query("SELECT id, v FROM t") == [(1, 10)]
