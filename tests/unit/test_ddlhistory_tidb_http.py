"""The TiDB HTTP status API as a DDL history source, against a scripted TiDB peer
(``tests.support.scripted_tidb``)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest
from aiohttp import web

from services.drainer.schema import MYSQL_DB, SchemaTracker
from services.drainer.translate import to_txn
from tests.support.drainer_binlogs import INS, ddl, dml, insert, mutation
from tests.support.net import free_port
from tests.support.scripted_tidb import Doc, ScriptedTidb, serving
from tests.support.tidb_jobs import CREATE_DB_JOB, CREATE_TABLE_JOB
from tributary.change import Ddl, RowKind
from tributary.ddlhistory import (
    DdlHistoryError,
    JobState,
    MalformedJob,
    ReadOnlyHistory,
    TidbHttpDdlHistory,
    job_from_json,
)


def recorded_jobs() -> list[Doc]:
    create_db = copy.deepcopy(CREATE_DB_JOB)
    create_table = json.loads(CREATE_TABLE_JOB)
    add_column = copy.deepcopy(create_table)
    add_column.update(id=113, type=5, query="ALTER TABLE Orders ADD COLUMN note VARCHAR(32)")
    table = add_column["binlog"]["TableInfo"]
    note = copy.deepcopy(table["cols"][1])
    note.update(id=6, offset=5, name={"O": "note", "L": "note"})
    note["type"]["Flag"] = 0
    table["cols"].append(note)
    add_column["binlog"]["SchemaVersion"] = 60
    cancelled = copy.deepcopy(add_column)
    cancelled.update(id=114, state=int(JobState.CANCELLED), query="ALTER TABLE Orders ADD x INT")
    cancelled["binlog"] = {"SchemaVersion": 0, "DBInfo": None, "TableInfo": None}
    return [create_db, create_table, add_column, cancelled]


async def test_jobs_by_id_and_since_a_schema_version() -> None:
    tidb = ScriptedTidb(recorded_jobs())
    async with serving(tidb) as url, TidbHttpDdlHistory.connect(url + "/") as history:
        job = await history.get_job(112)
        assert job == job_from_json(json.loads(CREATE_TABLE_JOB))
        assert tidb.queries == [{"start_job_id": "112", "limit": "1"}]
        assert await history.get_job(100) is None
        # The cancelled job 114 has no version: it is never "since" anything.
        assert [(j.id, j.schema_version) for j in await history.jobs_since(0)] == [
            (3, 57),
            (112, 58),
            (113, 60),
        ]
        assert [j.id for j in await history.jobs_since(58)] == [113]
        with pytest.raises(ReadOnlyHistory, match="cannot store job 112"):
            await history.put_job(job)


async def test_paging_backwards_stops_at_the_first_page_with_nothing_newer() -> None:
    tidb = ScriptedTidb(recorded_jobs())
    async with serving(tidb) as url, TidbHttpDdlHistory.connect(url, page_size=1) as history:
        assert [j.id for j in await history.jobs_since(0)] == [3, 112, 113]
        assert tidb.queries == [
            {"limit": "1"},
            {"start_job_id": "113", "limit": "1"},
            {"start_job_id": "112", "limit": "1"},
            {"start_job_id": "111", "limit": "1"},  # job 3 comes back (ids are sparse)
            {"start_job_id": "2", "limit": "1"},  # nothing left: an empty (null) page
        ]
        tidb.queries.clear()
        assert [j.id for j in await history.jobs_since(58)] == [113]
        # 114 (cancelled, no version) and 113 (v60) are read, 112 (v58) ends the walk.
        assert [q.get("start_job_id") for q in tidb.queries] == [None, "113", "112"]


async def test_a_server_that_ignores_start_job_id_is_read_whole() -> None:
    tidb = ScriptedTidb(recorded_jobs(), legacy=True)
    async with serving(tidb) as url, TidbHttpDdlHistory.connect(url, page_size=2) as history:
        job = await history.get_job(3)
        assert job is not None and job.db_info is not None and job.db_info.name == "shop"
        assert tidb.queries[-1] == {}  # fell back to the whole history
        assert [j.id for j in await history.jobs_since(0)] == [3, 112, 113]
        assert tidb.queries[-1] == {}


@pytest.mark.parametrize(
    ("answer", "error", "retriable"),
    [
        (lambda: web.Response(status=400, text="This node is not a ddl owner"), "HTTP 400", False),
        (lambda: web.Response(status=500, text="region unavailable"), "HTTP 500: region", True),
        (lambda: web.Response(text="<html>"), "not JSON", False),
        (lambda: web.json_response({"id": 1}), "expected a list of jobs, got a dict", False),
        (lambda: web.json_response([{"id": 1}]), "'type' is None", False),
    ],
)
async def test_bad_answers(answer: Callable[[], web.Response], error: str, retriable: bool) -> None:
    tidb = ScriptedTidb(recorded_jobs())
    tidb.answer = answer
    async with serving(tidb) as url, TidbHttpDdlHistory.connect(url) as history:
        with pytest.raises(DdlHistoryError, match=error) as e:
            await history.jobs_since(0)
    assert e.value.retriable is retriable
    assert isinstance(e.value, MalformedJob) is (error not in ("HTTP 400", "HTTP 500: region"))


async def test_an_unreachable_server_is_a_retriable_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with TidbHttpDdlHistory.connect(url, request_timeout=5) as history:
        with pytest.raises(DdlHistoryError, match=r"GET .*/ddl/history") as e:
            await history.get_job(1)
    assert e.value.retriable
    with pytest.raises(ValueError, match="page size"):
        TidbHttpDdlHistory(None, url, page_size=4096)  # type: ignore[arg-type]


async def test_the_drainer_translates_with_tidbs_history() -> None:
    async with (
        serving(ScriptedTidb(recorded_jobs())) as url,
        TidbHttpDdlHistory.connect(url) as history,
    ):
        schema = SchemaTracker()
        created = await to_txn(ddl(1000, 112, "CREATE TABLE Orders (...)"), schema, history)
        assert created.ddl == Ddl("shop", "CREATE TABLE Orders (...)", "Orders")
        orders = schema.table_at(111, 58).info
        row = insert(orders, {"id": 1, "code": "A-1", "amount": "9.90", "status": "paid"})
        txn = await to_txn(dml(1010, 58, mutation(111, (INS, row))), schema, history)
        change = txn.rows[0]
        assert change.kind is RowKind.INSERT and change.table.qualified == "shop.Orders"
        assert dict(change.values) == {"id": 1, "code": "A-1", "amount": "9.90", "status": "paid"}
        assert change.table.unique_keys[0].columns == ("code",)
        added = await to_txn(ddl(1020, 113, ""), schema, history)  # no query: the job's
        assert added.ddl == Ddl("shop", "ALTER TABLE Orders ADD COLUMN note VARCHAR(32)", "Orders")
        assert await to_txn(ddl(1030, 114, "ALTER TABLE Orders ADD x INT"), schema, history) == (
            type(added)(1030, 1029)
        )


def system_table_job(job_id: int, version: int, table_id: int, name: str) -> Doc:
    """A bootstrap job of TiDB 6.2+: a table of ``mysql`` (database 1, created without a job)."""
    doc: Doc = json.loads(CREATE_TABLE_JOB)
    doc.update(id=job_id, schema_id=1, table_id=table_id, schema_name="mysql", table_name=name)
    doc.update(query=f"CREATE TABLE IF NOT EXISTS mysql.{name} (...)")
    doc["involving_schema_info"] = [{"database": "mysql", "table": name}]
    doc["binlog"]["SchemaVersion"] = version
    doc["binlog"]["TableInfo"].update(id=table_id, name={"O": name, "L": name})
    return doc


async def test_a_fresh_drainer_replays_tidbs_history_with_the_mysql_tables() -> None:
    # What a real tidb-server (6.2+) serves: the tables of `mysql` (schema 1) first, no job
    # creating schema 1, then the user's databases. Every start replays it from version 0.
    shop = recorded_jobs()
    shop[0]["id"] = 30  # job ids grow with the versions, after the bootstrap jobs
    history_jobs = [
        system_table_job(5, 2, 4, "user"),
        system_table_job(7, 3, 6, "db"),
        system_table_job(9, 4, 8, "tidb"),
        *shop,
    ]
    async with (
        serving(ScriptedTidb(history_jobs)) as url,
        TidbHttpDdlHistory.connect(url, page_size=2) as history,
    ):
        orders = job_from_json(json.loads(CREATE_TABLE_JOB)).table_info
        assert orders is not None
        row = insert(orders, {"id": 1, "code": "A-1", "amount": "9.90", "status": "paid"})
        for _restart in range(2):
            schema = SchemaTracker()
            txn = await to_txn(dml(2000, 58, mutation(111, (INS, row))), schema, history)
            assert txn.rows[0].table.qualified == "shop.Orders"
            assert schema.table_at(4, 58).sink.qualified == "mysql.user"
            assert schema.table_at(8, 58).sink.qualified == "mysql.tidb"
        fresh = SchemaTracker()  # a restart on a DDL binlog: the catch-up runs first
        added = await to_txn(ddl(2010, 113, ""), fresh, history)
        assert added.ddl == Ddl("shop", "ALTER TABLE Orders ADD COLUMN note VARCHAR(32)", "Orders")
        assert fresh.database(1) == MYSQL_DB
