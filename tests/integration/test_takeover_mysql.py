"""Taking over a MySQL downstream from tidb-binlog's drainer, and handing it back.

tidb-binlog's drainer keeps its checkpoint in the downstream, a row of
``tidb_binlog.checkpoint(clusterID bigint unsigned primary key, checkPoint MEDIUMTEXT)`` keyed
by the upstream cluster ID and holding its JSON (``tests/support/tidb_binlog_go.py`` has its
statements and the JSON as ``json.Marshal`` writes it). Here the row is made with those
statements in a real MariaDB, and a real drainer process on real pumps takes over from it: the
transactions at or below its ``commitTS`` are not applied again (their rows are left out of the
downstream, so a replay would show), those above are, and the row it leaves is one tidb-binlog's
drainer reads back (its table, its statements, its JSON decoding), so a rollback resumes there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import asyncmy.errors
import pytest

from tests.support.pipeline import ORDERS, Pipeline, caught_up, commit, ddl, row, running_pipeline
from tests.support.tidb_binlog_go import (
    GoCheckpoint,
    go_checkpoint_json,
    go_checkpoint_statements,
    go_read_checkpoint,
    go_replace_sql,
    go_select_sql,
)
from tests.support.waits import until
from tributary.ddlhistory import Action

if TYPE_CHECKING:
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.timeout(300)]


async def shop(pipe: Pipeline) -> int:
    """``shop.orders`` created upstream (DDL history and binlogs); its schema version."""
    await ddl(pipe, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
    return await ddl(
        pipe, 2, Action.CREATE_TABLE, ORDERS, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
    )


async def orders(pipe: Pipeline, version: int, ids: range) -> list[int]:
    """Commit one transaction per id into ``shop.orders``; their commit ts."""
    return [await commit(pipe, row(ORDERS.id, version, rid)) for rid in ids]


async def ids(server: MariaDBServer) -> list[int]:
    return [int(r[0]) for r in await server.query("SELECT id FROM shop.orders ORDER BY id")]


async def go_checkpoint(server: MariaDBServer, cluster_id: int, schema: str) -> GoCheckpoint:
    """The row as tidb-binlog's drainer loads it: its select, its JSON decoding."""
    rows = await server.query(go_select_sql(cluster_id, schema))
    assert len(rows) == 1, rows
    return go_read_checkpoint(str(rows[0][0]))


async def test_a_drainer_resumes_from_the_row_tidb_binlogs_drainer_left(
    mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    down = mariadb_instance("downstream")
    async with running_pipeline(tmp_path, pumps=2) as pipe:
        version = await shop(pipe)
        c1, c2 = await orders(pipe, version, range(1, 3))
        # tidb-binlog's drainer stopped after t2: it had run the DDL and made and written its
        # checkpoint row with its own statements; the rows of t1 and t2 are left out
        await down.execute("CREATE DATABASE shop")
        await down.execute("CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)")
        for sql in go_checkpoint_statements():
            await down.execute(sql)
        await down.execute(go_replace_sql(pipe.cluster_id, go_checkpoint_json(c2, version)))
        c3, c4 = await orders(pipe, version, range(3, 5))

        drainer = await pipe.cluster.start_drainer(f"{down.dsn()}?consistent=true")
        (c5,) = await orders(pipe, version, range(5, 6))  # while it runs
        await caught_up(down.host, down.port, down.user, down.password, c5)
        assert await drainer.child.stop(30) == 0

    assert c1 < c2 < c3 < c4 < c5
    assert await ids(down) == [3, 4, 5]
    # a rollback: tidb-binlog's drainer finds the one row of its cluster, at t5 or past it
    # (fake binlogs move the checkpoint too), consistent after a clean stop
    back = await go_checkpoint(down, pipe.cluster_id, "tidb_binlog")
    assert (back.consistent, back.ts_map, back.schema_version) == (True, {}, version)
    assert back.commit_ts >= c5
    assert await down.query("select clusterID from tidb_binlog.checkpoint") == [(pipe.cluster_id,)]


def drainer_toml(path: Path, server: MariaDBServer, schema: str) -> Path:
    """A drainer.toml with tidb-binlog's keys only: the downstream and the checkpoint schema."""
    path.write_text(
        '[syncer]\ndb-type = "mysql"\n'
        f'[syncer.to]\nhost = "{server.host}"\nport = {server.port}\n'
        f'user = "{server.user}"\npassword = "{server.password}"\n'
        f'[syncer.to.checkpoint]\nschema = "{schema}"\n'
    )
    return path


COLUMNS = (
    "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, COLUMN_DEFAULT "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'checkpoint' "
    "ORDER BY ORDINAL_POSITION"
)


async def test_the_checkpoint_goes_back_to_tidb_binlog_and_comes_back(
    mariadb_instance: InstanceFactory, tmp_path: Path
) -> None:
    down = mariadb_instance("downstream")
    schema = "binlog_meta"  # [syncer.to.checkpoint] schema, as the Go drainer had it
    config = ["--config", str(drainer_toml(tmp_path / "drainer.toml", down, schema))]

    async with running_pipeline(tmp_path, pumps=2) as pipe:

        async def row_at(ts: int) -> bool:
            try:
                rows = await down.query(go_select_sql(pipe.cluster_id, schema))
            except asyncmy.errors.ProgrammingError:
                return False  # no table yet
            return bool(rows) and go_read_checkpoint(str(rows[0][0])).commit_ts >= ts

        first = await pipe.tso.get_ts()
        version = await shop(pipe)
        _, c2 = await orders(pipe, version, range(1, 3))
        # ours, started on an empty downstream with tidb-binlog's drainer.toml keys
        start = ["--initial-commit-ts", str(first)]
        drainer = await pipe.cluster.start_drainer("", extra=[*config, *start])
        await until(lambda: row_at(c2), within=60)
        assert await drainer.child.stop(30) == 0

        # 1. rolled back: the table ours made is the one tidb-binlog's statements make, and its
        #    drainer loads the row: after t2, consistent (a clean stop)
        for sql in go_checkpoint_statements("go_reference"):
            await down.execute(sql)
        assert await down.query(COLUMNS, (schema,)) == await down.query(COLUMNS, ("go_reference",))
        for sql in go_checkpoint_statements(schema):  # its start: no-ops on our table
            await down.execute(sql)
        back = await go_checkpoint(down, pipe.cluster_id, schema)
        assert (back.consistent, back.ts_map, back.schema_version) == (True, {}, version)
        # 2. tidb-binlog's drainer runs for a while: t3, above where it resumes, and its row
        #    saved by its statement (t3's row is left out downstream, so a replay would show)
        (c3,) = await orders(pipe, version, range(3, 4))
        assert c2 <= back.commit_ts < c3
        await down.execute(go_replace_sql(pipe.cluster_id, go_checkpoint_json(c3, version), schema))
        # 3. ours takes over again: after the row (its own savepoint file still says t2)
        (c4,) = await orders(pipe, version, range(4, 5))
        drainer = await pipe.cluster.start_drainer("", extra=config)
        await until(lambda: row_at(c4), within=60)
        assert await drainer.child.stop(30) == 0

    assert await ids(down) == [1, 2, 4]
    back = await go_checkpoint(down, pipe.cluster_id, schema)
    assert (back.consistent, back.ts_map, back.schema_version) == (True, {}, version)
    assert back.commit_ts >= c4
    assert await down.query("SHOW DATABASES LIKE 'tidb_binlog'") == []
