"""DDL through the workload: upstream statement, job in the DDL history, DDL binlog, catalog;
and what happens when one of those steps fails. Real SQLite upstream, in-memory etcd."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from tests.support.workload_fakes import SPEC, Events, LoggingTso, LoggingWriter
from tributary.coord.kv import Compare, Delete, KvError, Put, TxnResult
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import JOBS_PREFIX, Action, KvDdlHistory
from tributary.sql import Statement
from tributary.workload import columns
from tributary.workload.catalog import Catalog
from tributary.workload.env import Env
from tributary.workload.errors import Abort, HistoryDiverged, UpstreamError
from tributary.workload.runner import build_env
from tributary.workload.upstream_sqlite import SqliteUpstream


class FlakyKv(MemoryKv):
    """MemoryKv on which storing a DDL job fails while ``failing`` is set."""

    failing = False

    async def txn(
        self,
        compares: Sequence[Compare],
        success: Sequence[Put | Delete],
        failure: Sequence[Put | Delete] = (),
    ) -> TxnResult:
        if self.failing and any(
            isinstance(op, Put) and op.key.startswith(JOBS_PREFIX) for op in success
        ):
            raise KvError("etcd unreachable", retriable=True)
        return await super().txn(compares, success, failure)


class Setup:
    def __init__(self, env: Env, events: Events, kv: FlakyKv, up: SqliteUpstream) -> None:
        self.env, self.events, self.kv, self.up = env, events, kv, up
        self.history = KvDdlHistory(kv)

    async def columns_of(self, table: str) -> list[str]:
        async with self.up.session() as s:
            rows = await s.query(Statement(f"SELECT name FROM pragma_table_info('{table}')"))
        return [str(r[0]) for r in rows]

    async def tables(self) -> set[str]:
        async with self.up.session() as s:
            rows = await s.query(Statement("SELECT name FROM sqlite_master WHERE type='table'"))
        return {str(r[0]) for r in rows}


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    events: Events = []
    kv = FlakyKv()
    up = await SqliteUpstream.open(tmp_path / "up.db")
    try:
        env = await build_env(up, LoggingWriter(events), LoggingTso(events), KvDdlHistory(kv))
        yield Setup(env, events, kv, up)
    finally:
        await up.close()


def ddl_binlogs(events: Events) -> list[tuple[int, bytes]]:
    """(job id, query) of each DDL binlog, checking each prewrite got its commit after it."""
    out = []
    for i, e in enumerate(events):
        if e[0] == "prewrite":
            _, start, job_id, query = e
            commit = next(x for x in events[i:] if x[0] == "commit" and x[1] == start)
            assert commit[2] > start
            out.append((job_id, query))
    return out


async def test_each_ddl_kind_is_run_recorded_and_written(setup: Setup) -> None:
    env, history = setup.env, setup.history
    db = await env.ddl.create_database("db")
    t = await env.ddl.create_table("db", SPEC)
    t = await env.ddl.add_column(t, columns.int_("w", not_null=True, default="7"))
    t = await env.ddl.add_index(t, "idx_v", ("v",))
    t = await env.ddl.drop_column(t, "v")
    renamed = await env.ddl.rename_table(t, "t2")
    truncated = await env.ddl.truncate_table(renamed)
    other = await env.ddl.create_table("db", columns.TableSpec("gone", SPEC.columns, ("id",)))
    await env.ddl.drop_table(other)

    jobs = await history.jobs_since(0)
    assert [j.type for j in jobs] == [
        Action.CREATE_SCHEMA, Action.CREATE_TABLE, Action.ADD_COLUMN, Action.ADD_INDEX,
        Action.DROP_COLUMN, Action.RENAME_TABLE, Action.TRUNCATE_TABLE, Action.CREATE_TABLE,
        Action.DROP_TABLE,
    ]  # fmt: skip
    assert [j.schema_version for j in jobs] == list(range(1, 10)) and env.catalog.version == 9
    assert all(j.schema_id == db.id for j in jobs)
    assert ddl_binlogs(setup.events) == [(j.id, j.query.encode()) for j in jobs]
    added = jobs[2].table_info
    assert added is not None and added.columns[-1].name == "w" and added.columns[-1].id == 3
    assert added.columns[-1].default == "7" and added.columns[-1].origin_default == "7"
    assert [i.name for i in jobs[3].table_info.indices] == ["idx_v"]  # type: ignore[union-attr]
    assert renamed.id == t.id and renamed.name == "t2"
    assert truncated.id != renamed.id and jobs[6].table_id == renamed.id
    assert jobs[6].table_info is not None and jobs[6].table_info.id == truncated.id
    assert [x.name for x in env.catalog.tables("db")] == ["t2"]
    assert env.catalog.table_by_id(other.id) is None
    assert await setup.tables() == {"db__t2"}
    assert await setup.columns_of("db__t2") == ["id", "w"]
    reloaded = await Catalog.load(history)  # a restarted workload sees the same schema
    assert reloaded.tables("db") == env.catalog.tables("db") and reloaded.version == 9


async def test_a_ddl_the_upstream_refuses_leaves_no_trace(setup: Setup) -> None:
    env = setup.env
    await env.ddl.create_database("db")
    t = await env.ddl.create_table("db", SPEC)
    await env.ddl.create_table("db", columns.TableSpec("u", SPEC.columns, ("id",)))
    setup.events.clear()
    with pytest.raises(UpstreamError):
        await env.ddl.rename_table(t, "u")  # taken
    assert setup.events == [] and env.catalog.version == 3
    assert len(await setup.history.jobs_since(0)) == 3
    with pytest.raises(Abort):
        await env.ddl.drop_column(t, "nope")
    assert setup.events == [] and await setup.columns_of("db__t") == ["id", "v"]


async def test_a_ddl_that_ran_but_was_not_recorded_stops_the_workload(setup: Setup) -> None:
    env = setup.env
    await env.ddl.create_database("db")
    t = await env.ddl.create_table("db", SPEC)
    setup.events.clear()
    setup.kv.failing = True
    with pytest.raises(HistoryDiverged) as raised:
        await env.ddl.add_column(t, columns.int_("w"))
    assert not raised.value.retriable
    assert setup.events == [] and env.catalog.table_by_id(t.id) == t  # catalog unchanged
    setup.kv.failing = False
    assert await setup.columns_of("db__t") == ["id", "v", "w"]  # it did run upstream
