"""Builders of DDL jobs and table infos as TiDB's DDL history holds them (ids, schema versions,
column types), shared by the schema, translator and history tests."""

from __future__ import annotations

from collections.abc import Sequence

from tributary.ddlhistory import (
    Action,
    ColumnInfo,
    DbInfo,
    DdlJob,
    IndexColumn,
    IndexInfo,
    JobState,
    TableInfo,
)
from tributary.tidbcodec import ColumnType
from tributary.tidbcodec import mysqltypes as mt

INT = ColumnType(mt.TYPE_LONG, flen=11)


PK_INT = ColumnType(mt.TYPE_LONGLONG, flag=mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG, flen=20)


VARCHAR = ColumnType(mt.TYPE_VARCHAR, flen=20, charset="utf8mb4", collate="utf8mb4_bin")


DB_ID = 2


def col(cid: int, name: str, ft: ColumnType = INT, **kw: object) -> ColumnInfo:
    return ColumnInfo(id=cid, name=name, offset=0, ft=ft, **kw)  # type: ignore[arg-type]


def table(
    tid: int,
    name: str,
    cols: Sequence[ColumnInfo],
    *,
    pk_is_handle: bool = True,
    indices: Sequence[IndexInfo] = (),
    common: bool = False,
) -> TableInfo:
    placed = tuple(
        ColumnInfo(c.id, c.name, i, c.ft, c.state, c.default, c.origin_default, c.generated_expr)
        for i, c in enumerate(cols)
    )
    return TableInfo(
        tid, name, placed, tuple(indices), pk_is_handle=pk_is_handle, is_common_handle=common
    )


def index(
    iid: int, name: str, cols: Sequence[str], *, unique: bool = True, **kw: object
) -> IndexInfo:
    return IndexInfo(
        iid,
        name,
        tuple(IndexColumn(c, 0) for c in cols),
        unique=unique,
        **kw,  # type: ignore[arg-type]
    )


def job(
    jid: int,
    action: int,
    version: int,
    *,
    schema_id: int = DB_ID,
    table_id: int = 0,
    info: TableInfo | None = None,
    db: DbInfo | None = None,
    query: str = "",
    state: int = JobState.SYNCED,
) -> DdlJob:
    return DdlJob(
        id=jid,
        type=action,
        schema_id=schema_id,
        table_id=table_id or (info.id if info else 0),
        schema_name="",
        query=query or f"-- job {jid}",
        state=state,
        schema_version=version,
        table_info=info,
        db_info=db,
    )


def create_db(jid: int, version: int, name: str = "shop", db_id: int = DB_ID) -> DdlJob:
    return job(
        jid, Action.CREATE_SCHEMA, version, schema_id=db_id, db=DbInfo(db_id, name),
        query=f"CREATE DATABASE {name}",
    )  # fmt: skip


def create_table(jid: int, version: int, info: TableInfo, db_id: int = DB_ID) -> DdlJob:
    return job(jid, Action.CREATE_TABLE, version, schema_id=db_id, info=info,
               query=f"CREATE TABLE {info.name} (...)")  # fmt: skip


def alter(jid: int, version: int, info: TableInfo, action: int = Action.ADD_COLUMN) -> DdlJob:
    return job(jid, action, version, info=info, query=f"ALTER TABLE {info.name} ...")


T1 = table(40, "t", [col(1, "id", PK_INT), col(2, "a")])


T1_B = table(40, "t", [col(1, "id", PK_INT), col(2, "a"), col(3, "b", VARCHAR)])
