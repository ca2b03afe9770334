"""Writers build TiDB-shaped jobs, store them in the history, and the drainer reads them back."""

from __future__ import annotations

import dataclasses

import pytest

from services.drainer.schema import SchemaTracker
from services.drainer.translate import to_txn
from tests.support.drainer_binlogs import INS, UPD, ddl, dml, insert, mutation
from tributary.change import Ddl
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import (
    Action,
    DbInfo,
    DdlJob,
    KvDdlHistory,
    TableInfo,
    add_column,
    ddl_job,
    drop_column,
    table_info,
    with_keys,
)
from tributary.tidbcodec import ColumnType, encode_updated_row, to_datum
from tributary.tidbcodec import mysqltypes as mt

BIGINT = ColumnType(mt.TYPE_LONGLONG, flen=20)
NAME = ColumnType(mt.TYPE_VARCHAR, flen=32, charset="utf8mb4", collate="utf8mb4_bin")


def test_keys_and_flags_as_tidb_sets_them() -> None:
    t = table_info(
        40,
        "acct",
        [("id", BIGINT), ("owner", NAME), ("bal", BIGINT)],
        primary_key=["id"],
        unique_keys={"uk": ["owner"]},
    )
    assert [(c.id, c.offset) for c in t.columns] == [(1, 0), (2, 1), (3, 2)]
    assert t.pk_is_handle and t.columns[0].ft.flag == mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG
    assert t.columns[1].ft.flag == mt.UNIQUE_KEY_FLAG
    assert [(i.name, i.primary, i.unique) for i in t.indices] == [("uk", False, True)]
    assert [c.name for c in t.primary_key] == ["id"] and t.handle_columns == (t.columns[0],)

    composite = with_keys(t, ["owner", "bal"], {})
    assert not composite.pk_is_handle and composite.handle_columns == (None,)
    assert [(i.name, [c.name for c in i.columns]) for i in composite.indices] == [
        ("PRIMARY", ["owner", "bal"])
    ]
    assert composite.columns[0].ft.flag == mt.NOT_NULL_FLAG  # the key flags are gone
    assert [c.name for c in composite.primary_key] == ["owner", "bal"]

    t2 = add_column(drop_column(t, "owner"), "note", NAME)
    assert [(c.id, c.name, c.offset) for c in t2.columns] == [
        (1, "id", 0),
        (3, "bal", 1),
        (4, "note", 2),
    ]
    assert t2.indices == ()  # the index on the dropped column went with it
    with pytest.raises(ValueError, match="unknown columns"):
        table_info(41, "x", [("a", BIGINT)], primary_key=["b"])
    with pytest.raises(ValueError, match="no column nope"):
        drop_column(t, "nope")


async def test_a_writer_and_the_drainer_agree() -> None:
    history, schema = KvDdlHistory(MemoryKv()), SchemaTracker()
    db = DbInfo(await history.ids.next_table_id(), "bank")
    ts = 100

    async def run_ddl(action: Action, table: TableInfo | None, query: str, **kw: int) -> Ddl:
        """What a writer does for a DDL, then what the drainer makes of its binlog."""
        nonlocal ts
        job_id = await history.ids.next_job_id()

        def make(version: int) -> DdlJob:
            return ddl_job(job_id, action, version, db, table, query, **kw)

        job = await history.append_job(make)
        ts += 10
        txn = await to_txn(ddl(ts, job.id, query), schema, history)
        assert txn.ddl is not None and txn.schema_version == job.schema_version
        return txn.ddl

    assert await run_ddl(Action.CREATE_SCHEMA, None, "CREATE DATABASE bank") == Ddl(
        "bank", "CREATE DATABASE bank"
    )
    acct = table_info(
        await history.ids.next_table_id(),
        "acct",
        [("id", BIGINT), ("owner", NAME), ("bal", BIGINT)],
        primary_key=["id"],
        unique_keys={"uk_owner": ["owner"]},
    )
    assert (await run_ddl(Action.CREATE_TABLE, acct, "CREATE TABLE acct (...)")).table == "acct"
    row = insert(acct, {"id": 1, "owner": "ann", "bal": 10})
    txn = await to_txn(dml(200, schema.version, mutation(acct.id, (INS, row))), schema, history)
    sink = txn.rows[0].table
    assert (sink.primary_key, [(u.name, u.columns) for u in sink.unique_keys]) == (
        ("id",),
        [("uk_owner", ("owner",))],
    )

    wider = add_column(acct, "note", NAME)
    await run_ddl(Action.ADD_COLUMN, wider, "ALTER TABLE acct ADD COLUMN note VARCHAR(32)")
    narrower = drop_column(wider, "owner")
    await run_ddl(Action.DROP_COLUMN, narrower, "ALTER TABLE acct DROP COLUMN owner")
    old = [
        (c.id, to_datum(v, c.ft)) for c, v in zip(wider.columns, [1, "ann", 10, None], strict=True)
    ]
    new = [(c.id, to_datum(v, c.ft)) for c, v in zip(narrower.columns, [1, 15, "hi"], strict=True)]
    update = encode_updated_row([p for p in old if p[0] != 2], new)
    txn = await to_txn(dml(300, schema.version, mutation(acct.id, (UPD, update))), schema, history)
    change = txn.rows[0]
    assert dict(change.values) == {"id": 1, "bal": 15, "note": "hi"}
    assert change.old_values == {"id": 1, "bal": 10, "note": None}
    assert change.table.unique_keys == ()

    emptied = dataclasses.replace(narrower, id=await history.ids.next_table_id())
    truncate = await run_ddl(
        Action.TRUNCATE_TABLE, emptied, "TRUNCATE TABLE acct", table_id=acct.id
    )
    assert truncate == Ddl("bank", "TRUNCATE TABLE acct", "acct")
    assert (
        schema.is_truncated(acct.id)
        and schema.table_at(emptied.id, schema.version).id == emptied.id
    )
