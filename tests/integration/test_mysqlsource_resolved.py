"""Resolved ts from a real, idle MariaDB (``mysqlsource.resolved``): markers keep coming while
nothing is written and pass a ts taken after the last write; a statement that runs across
heartbeats still gets the ts a reader without markers gives it (so a resume is exact)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tributary.change import TableFilter
from tributary.sources.mysql import Position, SourceConfig, SourceTxn, current_position, open_source
from tributary.wire.ts import from_seconds

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(mariadb_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.mariadb import running_server

    base = tmp_path_factory.mktemp("resolved")
    with running_server(mariadb_template, base, ("--binlog-row-metadata=FULL",)) as srv:
        srv.admin("CREATE DATABASE r")
        srv.admin("CREATE TABLE r.t (id INT PRIMARY KEY, v INT)")
        yield srv


def config(server: MariaDBServer, *, resolve: bool) -> SourceConfig:
    return SourceConfig(
        server.host,
        server.port,
        server.user,
        server.password,
        filter=TableFilter(do_dbs=["r"]),
        heartbeat=0.3,
        resolve_idle=resolve,
    )


async def run(server: MariaDBServer, sql: str) -> None:
    async with server.connect("r") as conn, conn.cursor() as cur:
        await cur.execute(sql)


def data(items: list[SourceTxn]) -> list[SourceTxn]:
    return [i for i in items if not i.resolved and i.txn.rows]


async def test_an_idle_upstream_gives_markers_past_a_ts_taken_after_the_last_write(
    server: MariaDBServer,
) -> None:
    start = await current_position(config(server, resolve=True))
    await run(server, "INSERT INTO t VALUES (1, 1)")
    after = from_seconds(time.time())  # taken once the last write has committed
    seen: list[SourceTxn] = []
    async with asyncio.timeout(30), open_source(config(server, resolve=True), start) as txns:
        async for item in txns:
            seen.append(item)
            if item.resolved and item.txn.commit_ts > after:
                break
    rows = data(seen)
    assert len(rows) == 1 and rows[0].txn.rows[0].kind.name == "INSERT"
    markers = [i for i in seen if i.resolved]
    assert markers, "no resolved marker while idle"
    stamps = [i.txn.commit_ts for i in seen]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert all(m.txn.commit_ts > rows[0].txn.commit_ts for m in markers)
    assert all(not m.txn.rows and m.txn.ddl is None for m in markers)
    assert markers[-1].position == rows[0].position  # nothing read after the row


async def test_a_statement_running_across_heartbeats_keeps_its_replayed_ts(
    server: MariaDBServer,
) -> None:
    start = await current_position(config(server, resolve=True))
    await run(server, "INSERT INTO t VALUES (2, 2)")
    await asyncio.sleep(2.2)  # the update starts two clock seconds after the insert
    slow = asyncio.create_task(run(server, "UPDATE t SET v = SLEEP(3) + 3 WHERE id = 2"))
    live: list[SourceTxn] = []
    async with asyncio.timeout(30), open_source(config(server, resolve=True), start) as txns:
        async for item in txns:
            live.append(item)
            if len(data(live)) == 2:
                break
    await slow
    live_rows = data(live)
    assert [r.txn.rows[0].kind.name for r in live_rows] == ["INSERT", "UPDATE"]
    markers = [i for i in live if i.resolved]
    assert markers, "no resolved marker while the statement ran"
    assert all(m.txn.commit_ts < live_rows[1].txn.commit_ts for m in markers)
    # A reader that saw no markers (a resume from before them) gives the same ts.
    replay: list[SourceTxn] = []
    until = live_rows[1].position
    async with asyncio.timeout(30), open_source(config(server, resolve=False), start) as txns:
        async for item in txns:
            replay.append(item)
            if (item.position.file, item.position.pos) >= (until.file, until.pos):
                break
    assert [r.txn.commit_ts for r in data(replay)] == [r.txn.commit_ts for r in live_rows]


def test_position_order_is_by_file_then_offset() -> None:
    from tributary.sources.mysql.resolved import reached

    assert reached(Position("b.000002", 4), Position("b.000001", 900))
    assert reached(Position("b.000001", 900), Position("b.000001", 900))
    assert not reached(Position("b.000001", 899), Position("b.000001", 900))
