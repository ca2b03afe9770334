"""Building TiDB-shaped table infos and jobs, for our DDL writers (the load generator, tests).

The result looks like what TiDB itself would store for the same DDL: column ids from 1 in
order (a new column takes the next id), offsets in order, flags set on key columns; a single
integer primary key is the row handle (``pk_is_handle``, no index), any other primary key a
non-clustered ``PRIMARY`` index. Example::

    t = table_info(40, "acct", [("id", BIGINT), ("bal", BIGINT)], primary_key=["id"])
    job = ddl_job(7, Action.CREATE_TABLE, 12, DbInfo(2, "bank"), t, "CREATE TABLE acct (...)")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from tributary.ddlhistory.actions import Action
from tributary.ddlhistory.model import (
    ColumnInfo,
    DbInfo,
    DdlJob,
    IndexColumn,
    IndexInfo,
    JobState,
    SchemaState,
    TableInfo,
)
from tributary.tidbcodec import mysqltypes as mt

_KEY_FLAGS = mt.PRI_KEY_FLAG | mt.UNIQUE_KEY_FLAG | mt.MULTIPLE_KEY_FLAG


def _flagged(c: ColumnInfo, flag: int, *, clear: int = 0) -> ColumnInfo:
    return dataclasses.replace(c, ft=dataclasses.replace(c.ft, flag=c.ft.flag & ~clear | flag))


def table_info(
    table_id: int,
    name: str,
    columns: Sequence[tuple[str, mt.ColumnType]],
    *,
    primary_key: Sequence[str] = (),
    unique_keys: Mapping[str, Sequence[str]] | None = None,
    charset: str = "utf8mb4",
    collate: str = "utf8mb4_bin",
) -> TableInfo:
    cols = [ColumnInfo(i + 1, n, i, ft) for i, (n, ft) in enumerate(columns)]
    table = TableInfo(table_id, name, tuple(cols), charset=charset, collate=collate)
    return with_keys(table, primary_key, unique_keys or {})


def with_keys(
    t: TableInfo, primary_key: Sequence[str], unique_keys: Mapping[str, Sequence[str]]
) -> TableInfo:
    """``t`` with exactly these keys (its indexes and key flags replaced)."""
    by_name = {c.name.lower(): i for i, c in enumerate(t.columns)}
    named = [*primary_key, *(c for key in unique_keys.values() for c in key)]
    missing = [n for n in named if n.lower() not in by_name]
    if missing:
        raise ValueError(f"table {t.name}: keys name unknown columns {missing}")
    cols = [_flagged(c, 0, clear=_KEY_FLAGS) for c in t.columns]
    for n in primary_key:
        cols[by_name[n.lower()]] = _flagged(
            cols[by_name[n.lower()]], mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG
        )
    first = cols[by_name[primary_key[0].lower()]] if primary_key else None
    pk_is_handle = len(primary_key) == 1 and first is not None and first.ft.tp in mt.INTEGER_TYPES
    indices = [] if pk_is_handle or not primary_key else [_index(1, "PRIMARY", primary_key, t)]
    for name, key in unique_keys.items():
        flag = mt.UNIQUE_KEY_FLAG if len(key) == 1 else mt.MULTIPLE_KEY_FLAG
        cols[by_name[key[0].lower()]] = _flagged(cols[by_name[key[0].lower()]], flag)
        indices.append(_index(len(indices) + 1, name, key, t, primary=False))
    return dataclasses.replace(
        t, columns=tuple(cols), indices=tuple(indices), pk_is_handle=pk_is_handle
    )


def _index(
    iid: int, name: str, key: Sequence[str], t: TableInfo, *, primary: bool = True
) -> IndexInfo:
    cols = [t.column(n) for n in key]
    index_cols = tuple(IndexColumn(c.name, c.offset) for c in cols if c is not None)
    return IndexInfo(iid, name, index_cols, unique=True, primary=primary)


def add_column(t: TableInfo, name: str, ft: mt.ColumnType) -> TableInfo:
    """``t`` with a new last column; it takes the next column id."""
    new = ColumnInfo(max((c.id for c in t.columns), default=0) + 1, name, len(t.columns), ft)
    return dataclasses.replace(t, columns=(*t.columns, new))


def drop_column(t: TableInfo, name: str) -> TableInfo:
    """``t`` without column ``name`` (and without the indexes that used it)."""
    if t.column(name) is None:
        raise ValueError(f"table {t.name} has no column {name}")
    kept = [c for c in t.columns if c.name.lower() != name.lower()]
    cols = tuple(dataclasses.replace(c, offset=i) for i, c in enumerate(kept))
    indices = tuple(
        i for i in t.indices if all(ic.name.lower() != name.lower() for ic in i.columns)
    )
    return dataclasses.replace(t, columns=cols, indices=indices)


def ddl_job(
    job_id: int,
    action: Action,
    schema_version: int,
    db: DbInfo,
    table: TableInfo | None,
    query: str,
    *,
    table_id: int | None = None,
) -> DdlJob:
    """A finished (synced) job; ``table_id`` defaults to the table's (truncate: the old id)."""
    return DdlJob(
        id=job_id,
        type=action,
        schema_id=db.id,
        table_id=table_id if table_id is not None else (table.id if table else 0),
        schema_name=db.name,
        table_name=table.name if table else "",
        query=query,
        state=JobState.SYNCED,
        schema_version=schema_version,
        schema_state=SchemaState.PUBLIC,
        db_info=db if action in (Action.CREATE_SCHEMA, Action.DROP_SCHEMA) else None,
        table_info=table,
    )
