"""TiDB's DDL job JSON <-> DdlJob, table-info helpers and MySQL type names.

``CREATE_TABLE_JOB`` is a job as TiDB (v8) writes it into its DDL history and serves it from
``/ddl/history``: every field of ``model.Job``/``TableInfo``, most of which we ignore.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

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


def _col(cid: int, name: str, offset: int, ft: str, default: str = "null", state: int = 5) -> str:
    return (
        f'{{"id":{cid},"name":{{"O":"{name}","L":"{name.lower()}"}},"offset":{offset},'
        '"origin_default":null,"origin_default_bit":null,'
        f'"default":{default},"default_bit":null,"default_is_expr":false,'
        '"generated_expr_string":"","generated_stored":false,"dependences":null,'
        f'"type":{ft},"state":{state},"comment":"","hidden":false,"change_state_info":null,'
        '"version":2}'
    )


_BIGINT_PK = (
    '{"Tp":8,"Flag":515,"Flen":20,"Decimal":0,"Charset":"binary","Collate":"binary",'
    '"Elems":null,"ElemsIsBinaryLit":null,"Array":false}'
)
_VARCHAR = (
    '{"Tp":15,"Flag":4,"Flen":32,"Decimal":0,"Charset":"utf8mb4","Collate":"utf8mb4_bin",'
    '"Elems":null,"ElemsIsBinaryLit":null,"Array":false}'
)
_DECIMAL = (
    '{"Tp":246,"Flag":1,"Flen":12,"Decimal":2,"Charset":"binary","Collate":"binary",'
    '"Elems":null,"ElemsIsBinaryLit":null,"Array":false}'
)
_DATETIME = (
    '{"Tp":12,"Flag":128,"Flen":19,"Decimal":0,"Charset":"binary","Collate":"binary",'
    '"Elems":null,"ElemsIsBinaryLit":null,"Array":false}'
)
_ENUM = (
    '{"Tp":247,"Flag":0,"Flen":3,"Decimal":0,"Charset":"utf8mb4","Collate":"utf8mb4_bin",'
    '"Elems":["new","paid","it\'s"],"ElemsIsBinaryLit":[false,false,false],"Array":false}'
)
_TABLE = (
    '{"id":111,"name":{"O":"Orders","L":"orders"},"charset":"utf8mb4","collate":"utf8mb4_bin",'
    '"cols":['
    + ",".join(
        [
            _col(1, "id", 0, _BIGINT_PK),
            _col(2, "code", 1, _VARCHAR),
            _col(3, "amount", 2, _DECIMAL, '"0.00"'),
            _col(4, "created", 3, _DATETIME, '"CURRENT_TIMESTAMP"'),
            _col(5, "status", 4, _ENUM, '"new"'),
        ]
    )
    + '],"index_info":[{"id":1,"idx_name":{"O":"uk_code","L":"uk_code"},'
    '"tbl_name":{"O":"","L":""},"idx_cols":[{"name":{"O":"code","L":"code"},"offset":1,'
    '"length":-1}],"state":5,"backfill_state":0,"comment":"","index_type":1,"is_unique":true,'
    '"is_primary":false,"is_invisible":false,"is_global":false,"mv_index":false}],'
    '"constraint_info":null,"fk_info":null,"state":5,"pk_is_handle":true,'
    '"is_common_handle":false,"common_handle_version":0,"comment":"","auto_inc_id":0,'
    '"auto_id_cache":0,"auto_rand_id":0,"max_col_id":5,"max_idx_id":1,"max_fk_id":0,'
    '"max_cst_id":0,"update_timestamp":450204536786862086,"ShardRowIDBits":0,'
    '"max_shard_row_id_bits":0,"auto_random_bits":0,"auto_random_range_bits":0,'
    '"pre_split_regions":0,"partition":null,"compression":"","view":null,"sequence":null,'
    '"Lock":null,"version":5,"tiflash_replica":null,"is_columnar":false,"temp_table_type":0,'
    '"cache_table_status":0,"policy_ref_info":null,"stats_options":null,'
    '"exchange_partition_info":null,"ttl_info":null,"revision":0}'
)
CREATE_TABLE_JOB = (
    '{"id":112,"type":3,"schema_id":2,"table_id":111,"schema_name":"shop",'
    '"table_name":"Orders","state":6,"warning":null,"err":null,"err_count":0,"row_count":0,'
    '"raw_args":null,"schema_state":5,"snapshot_ver":0,"real_start_ts":450204536773492737,'
    '"start_ts":450204536773492736,"dependency_id":0,'
    '"query":"CREATE TABLE Orders (id BIGINT PRIMARY KEY, code VARCHAR(32) UNIQUE, ...)",'
    '"binlog":{"SchemaVersion":58,"DBInfo":null,"TableInfo":' + _TABLE + ","
    '"FinishedTS":450204536786862087,"multiple_table_infos":null},"version":2,'
    '"reorg_meta":null,"multi_schema_info":null,"priority":0,"seq_num":31,'
    '"charset":"utf8mb4","collate":"utf8mb4_bin",'
    '"involving_schema_info":[{"database":"shop","table":"Orders"}],"admin_operator":0,'
    '"trace_info":{"connection_id":2199023255957,"session_alias":""},"bdr_role":"",'
    '"cdc_write_source":0,"local_mode":false,"sql_mode":1436549152,'
    '"session_vars":{"tidb_scatter_region":""},"last_schema_version":0}'
)
CREATE_DB_JOB = {
    "id": 3,
    "type": 1,
    "schema_id": 2,
    "table_id": 0,
    "schema_name": "shop",
    "table_name": "",
    "state": 6,
    "schema_state": 5,
    "query": "CREATE DATABASE shop",
    "binlog": {
        "SchemaVersion": 57,
        "DBInfo": {
            "id": 2,
            "db_name": {"O": "shop", "L": "shop"},
            "charset": "utf8mb4",
            "collate": "utf8mb4_bin",
            "Deprecated": {},
            "state": 5,
            "policy_ref_info": None,
        },
        "TableInfo": None,
        "FinishedTS": 450204536000000000,
        "multiple_table_infos": None,
    },
}


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
