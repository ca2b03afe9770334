"""TiDB's DDL job JSON (``model.Job`` as ``json.Marshal`` writes it) <-> ``DdlJob``.

The shape, for the fields read here (everything else TiDB writes is ignored)::

    {"id": 7, "type": 5, "schema_id": 2, "table_id": 4, "schema_name": "shop",
     "table_name": "t", "state": 6, "schema_state": 5, "query": "ALTER TABLE ...",
     "binlog": {"SchemaVersion": 12, "DBInfo": null, "FinishedTS": 0,
                "TableInfo": {"id": 4, "name": {"O": "t", "L": "t"}, "cols": [...],
                              "index_info": [...], "pk_is_handle": true, ...},
                "multiple_table_infos": null}}

with columns ``{"id", "name": {"O","L"}, "offset", "state", "default", "origin_default",
"generated_expr_string", "type": {"Tp","Flag","Flen","Decimal","Charset","Collate","Elems"}}``,
indices ``{"id", "idx_name", "idx_cols": [{"name","offset","length"}], "is_unique",
"is_primary", "state"}`` and databases ``{"id", "db_name", "charset", "collate", "state"}``.

Invariant: ``job_from_json(job_to_json(j)) == j``; a document that is not such a job raises
``MalformedJob`` (never a ``KeyError``/``TypeError`` from deep inside).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tributary.ddlhistory.errors import MalformedJob
from tributary.ddlhistory.model import (
    ColumnInfo,
    DbInfo,
    DdlJob,
    IndexColumn,
    IndexInfo,
    JsonScalar,
    TableInfo,
)
from tributary.tidbcodec.mysqltypes import ColumnType

Doc = Mapping[str, Any]


def _int(doc: Doc, key: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedJob(f"{key!r} is {value!r}, not an integer")
    return value


def _str(doc: Doc, key: str, default: str | None = "") -> str:
    value = doc.get(key, default)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise MalformedJob(f"{key!r} is {value!r}, not a string")
    return value


def _obj(value: object, what: str) -> Doc:
    if not isinstance(value, Mapping):
        raise MalformedJob(f"{what} is {value!r}, not an object")
    return value


def _list(doc: Doc, key: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedJob(f"{key!r} is {value!r}, not a list")
    return value


def _name(doc: Doc, key: str) -> str:
    return _str(_obj(doc.get(key), key), "O", None)


def _scalar(doc: Doc, key: str) -> JsonScalar:
    value = doc.get(key)
    if value is not None and not isinstance(value, str | int | float | bool):
        raise MalformedJob(f"{key!r} is {value!r}, not a scalar")
    return value


def _ft(doc: Doc) -> ColumnType:
    elems = _list(doc, "Elems")
    if not all(isinstance(e, str) for e in elems):
        raise MalformedJob(f"Elems {elems!r} are not strings")
    return ColumnType(
        tp=_int(doc, "Tp"),
        flag=_int(doc, "Flag", 0),
        flen=_int(doc, "Flen", -1),
        decimal=_int(doc, "Decimal", -1),
        elems=tuple(elems),
        charset=_str(doc, "Charset"),
        collate=_str(doc, "Collate"),
    )


def _column(doc: Doc) -> ColumnInfo:
    return ColumnInfo(
        id=_int(doc, "id"),
        name=_name(doc, "name"),
        offset=_int(doc, "offset", 0),
        ft=_ft(_obj(doc.get("type"), "column type")),
        state=_int(doc, "state", 5),
        default=_scalar(doc, "default"),
        origin_default=_scalar(doc, "origin_default"),
        generated_expr=_str(doc, "generated_expr_string"),
    )


def _index(doc: Doc) -> IndexInfo:
    cols = [_obj(c, "index column") for c in _list(doc, "idx_cols")]
    return IndexInfo(
        id=_int(doc, "id", 0),
        name=_name(doc, "idx_name"),
        columns=tuple(
            IndexColumn(_name(c, "name"), _int(c, "offset", 0), _int(c, "length", -1)) for c in cols
        ),
        unique=bool(doc.get("is_unique", False)),
        primary=bool(doc.get("is_primary", False)),
        state=_int(doc, "state", 5),
    )


def table_from_json(doc: Doc) -> TableInfo:
    return TableInfo(
        id=_int(doc, "id"),
        name=_name(doc, "name"),
        columns=tuple(_column(_obj(c, "column")) for c in _list(doc, "cols")),
        indices=tuple(_index(_obj(i, "index")) for i in _list(doc, "index_info")),
        pk_is_handle=bool(doc.get("pk_is_handle", False)),
        is_common_handle=bool(doc.get("is_common_handle", False)),
        charset=_str(doc, "charset"),
        collate=_str(doc, "collate"),
        state=_int(doc, "state", 5),
    )


def _db(doc: Doc) -> DbInfo:
    return DbInfo(
        id=_int(doc, "id"),
        name=_name(doc, "db_name"),
        charset=_str(doc, "charset"),
        collate=_str(doc, "collate"),
        state=_int(doc, "state", 5),
    )


def job_from_json(doc: object) -> DdlJob:
    """A parsed JSON document (a dict) -> ``DdlJob``; raises ``MalformedJob``."""
    job = _obj(doc, "job")
    raw_info = job.get("binlog")
    info = {} if raw_info is None else _obj(raw_info, "binlog")
    db, table = info.get("DBInfo"), info.get("TableInfo")
    return DdlJob(
        id=_int(job, "id"),
        type=_int(job, "type"),
        schema_id=_int(job, "schema_id", 0),
        table_id=_int(job, "table_id", 0),
        schema_name=_str(job, "schema_name"),
        table_name=_str(job, "table_name"),
        query=_str(job, "query"),
        state=_int(job, "state"),
        schema_state=_int(job, "schema_state", 0),
        schema_version=_int(info, "SchemaVersion", 0),
        db_info=None if db is None else _db(_obj(db, "DBInfo")),
        table_info=None if table is None else table_from_json(_obj(table, "TableInfo")),
        multiple_table_infos=tuple(
            table_from_json(_obj(t, "table info")) for t in _list(info, "multiple_table_infos")
        ),
        finished_ts=_int(info, "FinishedTS", 0),
    )


def loads_job(data: bytes | str) -> DdlJob:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MalformedJob(f"job is not JSON: {e}") from e
    return job_from_json(doc)


def _cistr(name: str) -> dict[str, str]:
    return {"O": name, "L": name.lower()}


def _ft_json(ft: ColumnType) -> dict[str, Any]:
    return {
        "Tp": ft.tp,
        "Flag": ft.flag,
        "Flen": ft.flen,
        "Decimal": ft.decimal,
        "Charset": ft.charset,
        "Collate": ft.collate,
        "Elems": list(ft.elems) or None,
    }


def _column_json(c: ColumnInfo) -> dict[str, Any]:
    return {
        "id": c.id,
        "name": _cistr(c.name),
        "offset": c.offset,
        "origin_default": c.origin_default,
        "default": c.default,
        "generated_expr_string": c.generated_expr,
        "type": _ft_json(c.ft),
        "state": c.state,
    }


def _index_json(i: IndexInfo) -> dict[str, Any]:
    cols = [{"name": _cistr(c.name), "offset": c.offset, "length": c.length} for c in i.columns]
    return {
        "id": i.id,
        "idx_name": _cistr(i.name),
        "idx_cols": cols,
        "state": i.state,
        "is_unique": i.unique,
        "is_primary": i.primary,
    }


def table_to_json(t: TableInfo) -> dict[str, Any]:
    return {
        "id": t.id,
        "name": _cistr(t.name),
        "charset": t.charset,
        "collate": t.collate,
        "cols": [_column_json(c) for c in t.columns],
        "index_info": [_index_json(i) for i in t.indices] or None,
        "state": t.state,
        "pk_is_handle": t.pk_is_handle,
        "is_common_handle": t.is_common_handle,
    }


def job_to_json(job: DdlJob) -> dict[str, Any]:
    db = job.db_info
    db_json = None
    if db is not None:
        db_json = {
            "id": db.id,
            "db_name": _cistr(db.name),
            "charset": db.charset,
            "collate": db.collate,
            "state": db.state,
        }
    return {
        "id": job.id,
        "type": job.type,
        "schema_id": job.schema_id,
        "table_id": job.table_id,
        "schema_name": job.schema_name,
        "table_name": job.table_name,
        "state": job.state,
        "schema_state": job.schema_state,
        "query": job.query,
        "binlog": {
            "SchemaVersion": job.schema_version,
            "DBInfo": db_json,
            "TableInfo": None if job.table_info is None else table_to_json(job.table_info),
            "FinishedTS": job.finished_ts,
            "multiple_table_infos": [table_to_json(t) for t in job.multiple_table_infos] or None,
        },
    }


def dumps_job(job: DdlJob) -> bytes:
    return json.dumps(job_to_json(job), separators=(",", ":")).encode()
