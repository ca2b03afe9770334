"""DDL jobs as TiDB writes them into its DDL history and serves them from ``/ddl/history``.

``CREATE_TABLE_JOB`` is a job as TiDB (v8) writes it: every field of ``model.Job``/``TableInfo``,
most of which we ignore; ``CREATE_DB_JOB`` the same for a database, as parsed JSON.
"""

from __future__ import annotations


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
