"""TiDB's DDL job JSON <-> DdlJob, table-info helpers and MySQL type names.

``CREATE_TABLE_JOB`` (``tests.support.tidb_jobs``) is a job as TiDB (v8) writes it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.tidb_jobs import (
    CREATE_DB_JOB,
    CREATE_TABLE_JOB,
)
from tributary.ddlhistory import (
    Action,
    DbInfo,
    DdlJob,
    JobState,
    MalformedJob,
    dumps_job,
    job_from_json,
    job_to_json,
    loads_job,
    mysql_type,
)
from tributary.tidbcodec import ColumnType
from tributary.tidbcodec import mysqltypes as mt


def test_a_job_as_tidb_writes_it() -> None:
    job = loads_job(CREATE_TABLE_JOB)
    assert (job.id, job.type, job.schema_id, job.table_id) == (112, Action.CREATE_TABLE, 2, 111)
    assert (job.state, job.schema_version, job.schema_name) == (JobState.SYNCED, 58, "shop")
    assert job.is_done and job.query.startswith("CREATE TABLE Orders")
    t = job.table_info
    assert t is not None and (t.id, t.name, t.pk_is_handle) == (111, "Orders", True)
    assert [(c.id, c.name, c.offset) for c in t.columns][:2] == [(1, "id", 0), (2, "code", 1)]
    assert t.columns[0].ft == ColumnType(8, 515, 20, 0, (), "binary", "binary")
    assert t.columns[2].default == "0.00" and t.columns[3].default == "CURRENT_TIMESTAMP"
    assert t.columns[4].ft.elems == ("new", "paid", "it's")
    assert [c.mysql_type for c in t.columns] == [
        "bigint",
        "varchar(32)",
        "decimal(12,2)",
        "datetime",
        "enum('new','paid','it''s')",
    ]
    assert [c.name for c in t.primary_key] == ["id"]
    assert {k: [c.name for c in v] for k, v in t.unique_keys.items()} == {"uk_code": ["code"]}
    assert t.handle_columns == (t.columns[0],)
    assert t.column("CODE") is t.columns[1] and t.column("nope") is None

    db_job = job_from_json(CREATE_DB_JOB)
    assert db_job.db_info == DbInfo(2, "shop", "utf8mb4", "utf8mb4_bin")
    assert (db_job.schema_version, db_job.table_info) == (57, None)


def test_round_trip_keeps_every_modelled_field() -> None:
    for job in (loads_job(CREATE_TABLE_JOB), job_from_json(CREATE_DB_JOB)):
        assert loads_job(dumps_job(job)) == job
        assert job_from_json(json.loads(json.dumps(job_to_json(job)))) == job
    doc = job_to_json(loads_job(CREATE_TABLE_JOB))
    assert doc["binlog"]["SchemaVersion"] == 58  # TiDB's key names, readable by TiDB tools
    assert doc["binlog"]["TableInfo"]["cols"][0]["name"] == {"O": "id", "L": "id"}
    assert doc["binlog"]["TableInfo"]["cols"][0]["type"]["Tp"] == 8


def _broken(path: list[str | int], value: Any) -> Any:
    doc = json.loads(CREATE_TABLE_JOB)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        (["id"], "112", "'id' is '112', not an integer"),
        (["type"], KeyError, "'type' is None, not an integer"),
        (["state"], True, "'state' is True, not an integer"),
        (["binlog"], [], "binlog is .*not an object"),
        (["binlog", "TableInfo", "cols"], {}, "'cols' is .*not a list"),
        (["binlog", "TableInfo", "cols", 0, "name"], "id", "name is 'id', not an object"),
        (["binlog", "TableInfo", "cols", 0, "type", "Elems"], [1], "Elems .* not strings"),
        (["binlog", "TableInfo", "cols", 1, "default"], {"x": 1}, "'default' is .* not a scalar"),
        (["binlog", "TableInfo", "index_info", 0, "idx_cols"], 5, "'idx_cols' is 5, not a list"),
    ],
)
def test_a_malformed_job_is_rejected_clearly(path: list[str | int], value: Any, error: str) -> None:
    with pytest.raises(MalformedJob, match=error):
        job_from_json(_broken(path, value))


def test_not_json_and_not_an_object() -> None:
    with pytest.raises(MalformedJob, match="not JSON"):
        loads_job(b"{\xff")
    with pytest.raises(MalformedJob, match="job is \\[\\], not an object"):
        loads_job("[]")
    assert not MalformedJob("x").retriable


def test_a_cancelled_job_did_not_happen() -> None:
    job = DdlJob(5, Action.ADD_COLUMN, 2, 40, "shop", "ALTER ...", JobState.ROLLBACK_DONE, 0)
    assert not job.is_done
    assert DdlJob(5, 5, 2, 40, "shop", "ALTER ...", JobState.DONE, 9).is_done


@pytest.mark.parametrize(
    ("ft", "name"),
    [
        (ColumnType(mt.TYPE_TINY, mt.UNSIGNED_FLAG, 3), "tinyint unsigned"),
        (ColumnType(mt.TYPE_INT24), "mediumint"),
        (ColumnType(mt.TYPE_DOUBLE), "double"),
        (ColumnType(mt.TYPE_NEWDECIMAL, 0, 65, 30), "decimal(65,30)"),
        (ColumnType(mt.TYPE_STRING, 0, 4, charset="utf8mb4"), "char(4)"),
        (ColumnType(mt.TYPE_STRING, mt.BINARY_FLAG, 4, charset="binary"), "binary(4)"),
        (ColumnType(mt.TYPE_VARCHAR, 0, 255, charset="binary"), "varbinary(255)"),
        (ColumnType(mt.TYPE_BLOB, mt.BLOB_FLAG, charset="utf8mb4"), "text"),
        (ColumnType(mt.TYPE_LONG_BLOB, mt.BLOB_FLAG, charset="binary"), "longblob"),
        (ColumnType(mt.TYPE_TIMESTAMP, decimal=6), "timestamp(6)"),
        (ColumnType(mt.TYPE_DURATION, decimal=0), "time"),
        (ColumnType(mt.TYPE_DATE), "date"),
        (ColumnType(mt.TYPE_YEAR, flen=4), "year"),
        (ColumnType(mt.TYPE_BIT, flen=1), "bit(1)"),
        (ColumnType(mt.TYPE_SET, elems=("a", "b")), "set('a','b')"),
        (ColumnType(mt.TYPE_JSON), "json"),
    ],
)
def test_mysql_type_names(ft: ColumnType, name: str) -> None:
    assert mysql_type(ft) == name
