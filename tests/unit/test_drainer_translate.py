"""Binlog -> change.Txn: rows built with TiDB's codec, DDL through the history and tracker."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from services.drainer.errors import DrainerError
from services.drainer.item import PulledBinlogItem
from services.drainer.schema import SchemaTracker, UnknownTable
from services.drainer.translate import (
    DdlJobMissing,
    HistoryUnavailable,
    UndecodableBinlog,
    to_txn,
)
from tests.support.ddl_jobs import (
    T1,
    T1_B,
    VARCHAR,
    alter,
    col,
    create_db,
    create_table,
    index,
    job,
    table,
)
from tests.support.drainer_binlogs import (
    COMMIT,
    CST,
    DEL,
    INS,
    TYPES,
    TYPES_ROW,
    TYPES_SENT,
    UPD,
    cols_of,
    ddl,
    dml,
    history_with,
    insert,
    mutation,
)
from tributary.change import Ddl, RowKind, Txn
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import Action, DdlJob, JobState, KvDdlHistory, SchemaState
from tributary.tidbcodec import (
    JSON_NULL,
    BytesDatum,
    ColumnType,
    CoreTime,
    IntDatum,
    encode_deleted_row,
    encode_inserted_row,
    encode_updated_row,
)
from tributary.tidbcodec import mysqltypes as mt
from tributary.wire.binlog import Binlog, MutationType, TableMutation


class CountingHistory:
    """Our DdlHistory port around another one, counting full-history reads."""

    def __init__(self, inner: KvDdlHistory) -> None:
        self.inner = inner
        self.scans = 0

    async def get_job(self, job_id: int) -> DdlJob | None:
        return await self.inner.get_job(job_id)

    async def put_job(self, job: DdlJob) -> None:
        await self.inner.put_job(job)

    async def jobs_since(self, schema_version: int) -> list[DdlJob]:
        self.scans += 1
        return await self.inner.jobs_since(schema_version)


BASE = (create_db(1, 1), create_table(2, 2, T1), create_table(3, 3, TYPES))


async def test_every_column_type_and_every_row_kind_in_one_transaction() -> None:
    history, schema = await history_with(*BASE), SchemaTracker()
    nulls = {n: None for n in TYPES_ROW if n != "id"}
    zero = {"id": 8, **nulls, "dtm": CoreTime(), "j": JSON_NULL}
    ins, upd, dele = INS, UPD, DEL
    t1 = mutation(
        40,
        (ins, insert(T1, {"id": 1, "a": 1})),
        (upd, encode_updated_row(cols_of(T1, {"id": 1, "a": 1}), cols_of(T1, {"id": 1, "a": 2}))),
        (ins, insert(T1, {"id": 2, "a": 3})),
        (dele, encode_deleted_row([*cols_of(T1, {"id": 2, "a": 3}), (-1, IntDatum(2))])),
    )
    types = mutation(100, (ins, insert(TYPES, TYPES_ROW)), (ins, insert(TYPES, zero)))
    txn = await to_txn(dml(50, 3, t1, types), schema, history, tz=CST)

    assert (txn.commit_ts, txn.start_ts, txn.schema_version, txn.ddl) == (50, 49, 3, None)
    got = [(r.kind, r.table.table, dict(r.values), r.old_values) for r in txn.rows]
    assert got[:4] == [
        (RowKind.INSERT, "t", {"id": 1, "a": 1}, None),
        (RowKind.UPDATE, "t", {"id": 1, "a": 2}, {"id": 1, "a": 1}),
        (RowKind.INSERT, "t", {"id": 2, "a": 3}, None),
        (RowKind.DELETE, "t", {"id": 2, "a": 3}, None),  # the hidden handle column is left out
    ]
    assert got[4][2] == TYPES_SENT
    assert list(got[4][2]) == [c.name for c in TYPES.columns]  # table order
    assert got[5][2] == {"id": 8, **nulls, "dtm": "0000-00-00 00:00:00.000", "j": "null"}
    sink = txn.rows[4].table
    assert (sink.qualified, sink.primary_key) == ("shop.types", ("id",))
    types_of = {c.name: c.mysql_type for c in sink.columns}
    assert types_of["u64"] == "bigint unsigned" and types_of["dec"] == "decimal(10,2)"
    assert types_of["e"] == "enum('red','green')" and types_of["st"] == "set('a','b','c')"
    assert types_of["dtm"] == "datetime(3)" and types_of["tm2"] == "time(2)"
    assert types_of["bl"] == "blob" and types_of["bt"] == "bit(8)"


async def test_an_unsigned_handle_and_a_clustered_key_come_from_the_handle() -> None:
    u = ColumnType(mt.TYPE_LONGLONG, flag=mt.PRI_KEY_FLAG | mt.UNSIGNED_FLAG)
    unsigned = table(110, "big", [col(1, "id", u), col(2, "v")])
    pk = index(1, "PRIMARY", ["k", "n"], primary=True)
    clustered = table(
        111, "c", [col(1, "k", VARCHAR), col(2, "n"), col(3, "v")], pk_is_handle=False,
        indices=[pk], common=True,
    )  # fmt: skip
    history = await history_with(
        create_db(1, 1), create_table(2, 2, unsigned), create_table(3, 3, clustered)
    )
    # TiDB writes an int handle signed: 2**64-1 arrives as -1. Rows without the key columns.
    row1 = encode_inserted_row([IntDatum(-1)], [(2, IntDatum(5))])
    row2 = encode_inserted_row([BytesDatum(b"key"), IntDatum(9)], [(3, IntDatum(1))])
    ins = INS
    txn = await to_txn(
        dml(60, 3, mutation(110, (ins, row1)), mutation(111, (ins, row2))),
        SchemaTracker(),
        history,
    )
    assert [dict(r.values) for r in txn.rows] == [
        {"id": 2**64 - 1, "v": 5},
        {"k": "key", "n": 9, "v": 1},
    ]


async def test_ddl_mid_stream_rows_are_read_with_their_own_schema_version() -> None:
    add_b = alter(4, 4, T1_B, Action.ADD_COLUMN)
    history, schema = await history_with(*BASE, add_b), SchemaTracker()
    ins = INS
    stream = [
        ddl(10, 1, "CREATE DATABASE shop"),
        ddl(20, 2, "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT)"),
        ddl(25, 3, "CREATE TABLE types (...)"),
        dml(30, 3, mutation(40, (ins, insert(T1, {"id": 1, "a": 5})))),
        ddl(40, 4, "ALTER TABLE t ADD COLUMN b VARCHAR(20)"),
        dml(50, 4, mutation(40, (ins, insert(T1_B, {"id": 2, "a": 6, "b": "x"})))),
        # A late transaction that started before the ALTER carries version 3 and no b.
        dml(60, 3, mutation(40, (ins, insert(T1, {"id": 3, "a": 7})))),
    ]
    txns = [await to_txn(item, schema, history) for item in stream]
    assert [t.ddl for t in txns[:3]] == [
        Ddl("shop", "CREATE DATABASE shop", ""),
        Ddl("shop", "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT)", "t"),
        Ddl("shop", "CREATE TABLE types (...)", "types"),
    ]
    assert txns[4].ddl == Ddl("shop", "ALTER TABLE t ADD COLUMN b VARCHAR(20)", "t")
    assert txns[4].schema_version == 4 and not txns[4].rows
    row_at_3, row_at_4, late = (txns[i].rows[0] for i in (3, 5, 6))
    assert dict(row_at_3.values) == {"id": 1, "a": 5}
    assert row_at_3.table.column_names == ("id", "a")
    assert dict(row_at_4.values) == {"id": 2, "a": 6, "b": "x"}
    assert row_at_4.table.column_names == ("id", "a", "b")
    assert dict(late.values) == {"id": 3, "a": 7} and late.table.column_names == ("id", "a")
    assert schema.version == 4


async def test_a_restarted_drainer_catches_up_from_the_history_once() -> None:
    add_b = alter(4, 4, T1_B)
    history = CountingHistory(await history_with(*BASE, add_b))
    schema = SchemaTracker()  # a fresh drainer: the history holds jobs it never saw as binlogs
    ins = INS
    txn = await to_txn(
        dml(100, 4, mutation(40, (ins, insert(T1_B, {"id": 1, "a": 1, "b": "y"})))),
        schema,
        history,
    )
    assert dict(txn.rows[0].values) == {"id": 1, "a": 1, "b": "y"}
    assert history.scans == 1 and schema.version == 4
    for ts in (110, 120):
        await to_txn(dml(ts, 4, mutation(40, (ins, insert(T1_B, {"id": ts})))), schema, history)
    assert history.scans == 1  # caught up: later binlogs at that version read nothing more
    await to_txn(dml(130, 9, mutation(40)), schema, history)  # a newer version with no job
    assert history.scans == 2 and schema.version == 9
    await to_txn(dml(140, 9, mutation(40)), schema, history)
    assert history.scans == 2

    # A DDL binlog whose job is far ahead: the jobs between come from the history first.
    fresh = SchemaTracker()
    drop = job(6, Action.DROP_TABLE, 6, table_id=100)
    await history.put_job(drop)
    txn = await to_txn(ddl(150, 6, "DROP TABLE types"), fresh, history)
    assert txn.ddl == Ddl("shop", "DROP TABLE types", "types") and fresh.version == 6
    assert fresh.table_at(40, 6).sink.column_names == ("id", "a", "b")


async def test_ddl_that_changes_nothing_downstream_moves_only_the_checkpoint() -> None:
    drop_b = alter(5, 5, T1, Action.DROP_COLUMN)
    cancelled = dataclasses.replace(alter(6, 6, T1_B), state=JobState.CANCELLED)
    lock = job(7, Action.LOCK_TABLE, 7, table_id=40)
    history = await history_with(*BASE, alter(4, 4, T1_B), drop_b, cancelled, lock)
    schema = SchemaTracker()
    await to_txn(dml(205, 4, mutation(40)), schema, history)  # catches up to version 4
    marker = Txn(210, 209)
    # DROP COLUMN's DeleteOnly step: nothing yet, the column is still there.
    delete_only = ddl(210, 5, "ALTER TABLE t DROP COLUMN b", SchemaState.DELETE_ONLY)
    assert await to_txn(delete_only, schema, history) == marker
    assert schema.table_at(40, 5).sink.column_names == ("id", "a", "b")
    done = await to_txn(ddl(220, 5, "ALTER TABLE t DROP COLUMN b"), schema, history)
    assert done.ddl == Ddl("shop", "ALTER TABLE t DROP COLUMN b", "t")
    assert schema.table_at(40, 5).sink.column_names == ("id", "a")
    assert await to_txn(ddl(230, 6, "ALTER TABLE t ADD b"), schema, history) == Txn(230, 229)
    assert await to_txn(ddl(240, 7, "LOCK TABLES t WRITE"), schema, history) == Txn(240, 239)
    setval = ddl(250, 99, "SELECT SETVAL(seq, 10)")
    assert await to_txn(setval, schema, history) == Txn(250, 249)
    fake = PulledBinlogItem(260, 260, b"", True)
    assert await to_txn(fake, schema, history) == Txn(260, 260)
    assert schema.version == 7


async def test_rows_of_a_truncated_table_are_dropped() -> None:
    new_t = dataclasses.replace(T1, id=41)
    trunc = job(4, Action.TRUNCATE_TABLE, 4, table_id=40, info=new_t)
    history, schema = await history_with(*BASE, trunc), SchemaTracker()
    await to_txn(ddl(300, 4, "TRUNCATE TABLE t"), schema, history)
    ins = INS
    old = mutation(40, (ins, insert(T1, {"id": 1, "a": 1})))
    new = mutation(41, (ins, insert(T1, {"id": 2, "a": 2})))
    txn = await to_txn(dml(310, 4, old, new), schema, history)
    assert [dict(r.values) for r in txn.rows] == [{"id": 2, "a": 2}]


async def test_an_unknown_table_id_names_the_commit_ts() -> None:
    history, schema = await history_with(*BASE), SchemaTracker()
    ins = INS
    good = mutation(40, (ins, insert(T1, {"id": 1, "a": 1})))
    item = dml(400, 3, good, mutation(999, (ins, insert(T1, {"id": 1}))))
    with pytest.raises(UnknownTable, match=r"commit ts 400: table id 999: .*unknown") as e:
        await to_txn(item, schema, history)
    assert isinstance(e.value, DrainerError) and not e.value.retriable
    # Table 40 was created at version 2: a transaction that began before (its binlog carries
    # the version of its start) and wrote the table after, as TiDB's metadata lock allows,
    # is read with the table's first version (tests/unit/test_drainer_tidb_bytes.py).
    early = await to_txn(dml(410, 1, good), schema, history)
    assert [dict(r.values) for r in early.rows] == [{"id": 1, "a": 1}]


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([(INS, b"\x08")], r"insert row 0: .*"),  # a handle cut short
        (
            [(INS, encode_inserted_row([IntDatum(1)], [(2, BytesDatum(b"x"))]))],
            r"insert row 0: column type 3 cannot hold",
        ),
        ([(UPD, encode_deleted_row([(2, IntDatum(1))]))], r"update row 0: "),
        ([(DEL, b"\x80\x00")], r"delete row 0: .*new row format"),
    ],
)
async def test_an_undecodable_row_names_the_commit_ts_and_the_table(
    rows: Sequence[tuple[MutationType, bytes]], error: str
) -> None:
    history, schema = await history_with(*BASE), SchemaTracker()
    good = mutation(100, (INS, insert(TYPES, {"id": 1})))
    with pytest.raises(UndecodableBinlog, match=f"commit ts 500: table shop.t .id 40.: {error}"):
        await to_txn(dml(500, 3, good, mutation(40, *rows)), schema, history)


async def test_the_bad_row_is_named_by_its_place_among_rows_of_its_kind() -> None:
    history, schema = await history_with(*BASE), SchemaTracker()
    row = insert(T1, {"id": 1, "a": 1})
    gone = encode_deleted_row(cols_of(T1, {"id": 2, "a": 2}))
    bad = encode_inserted_row([IntDatum(9)], [(2, BytesDatum(b"x"))])  # bytes in an int column
    mixed = mutation(40, (INS, row), (DEL, gone), (INS, row), (DEL, gone), (INS, bad))
    with pytest.raises(UndecodableBinlog, match=r"table shop.t .id 40.: insert row 2: column"):
        await to_txn(dml(630, 3, mixed), schema, history)
    changed = encode_updated_row(cols_of(T1, {"id": 1, "a": 1}), cols_of(T1, {"id": 1, "a": 2}))
    updates = mutation(40, (UPD, changed), (UPD, changed), (UPD, changed[:-1]))
    with pytest.raises(UndecodableBinlog, match=r"update row 2: "):
        await to_txn(dml(640, 3, updates), schema, history)


async def test_a_malformed_mutation_or_payload_is_undecodable() -> None:
    history, schema = await history_with(*BASE), SchemaTracker()
    row = insert(T1, {"id": 1, "a": 1})
    extra = mutation(40, (INS, row))
    extra.inserted_rows.append(row)
    short = mutation(40, (INS, row))
    short.sequence.append(UPD)
    obsolete = TableMutation(
        table_id=40, deleted_ids=[1], sequence=[MutationType(MutationType.DeleteID)]
    )
    old_kind = TableMutation(table_id=40, sequence=[MutationType(MutationType.DeletePK)])
    cases = [
        (extra, r"rows missing from the sequence: \{'insert': 1\}"),
        (short, r"sequence\[1\] wants update row 0: none left"),
        (obsolete, r"obsolete deleted_ids"),
        (old_kind, r"sequence\[0\] is mutation type 3, not supported"),
    ]
    for m, error in cases:
        with pytest.raises(UndecodableBinlog, match=f"commit ts 600: table shop.t .*{error}"):
            await to_txn(dml(600, 3, m), schema, history)
    garbage = PulledBinlogItem(610, 609, b"\xff\xff\xff", False)
    with pytest.raises(UndecodableBinlog, match="commit ts 610: payload: not a Binlog"):
        await to_txn(garbage, schema, history)
    bad_pv = Binlog(tp=COMMIT, start_ts=1, commit_ts=620, prewrite_value=b"\xff\xff")
    with pytest.raises(UndecodableBinlog, match="commit ts 620: prewrite value: not a Prewrite"):
        await to_txn(PulledBinlogItem(620, 1, bytes(bad_pv), False), schema, history)


async def test_a_missing_job_is_retriable_and_a_broken_history_is_reported() -> None:
    history, schema = await history_with(*BASE), SchemaTracker()
    with pytest.raises(DdlJobMissing, match="commit ts 700: DDL job 42 is not in the history") as e:
        await to_txn(ddl(700, 42, "ALTER TABLE t ADD c INT"), schema, history)
    assert e.value.retriable
    kv = MemoryKv()
    await kv.put(b"/tidb-binlog/v1/ddl-history/jobs/00000000000000000005", b"{not json")
    with pytest.raises(HistoryUnavailable, match=r"commit ts 710: DDL job 5: DDL history: .*JSON"):
        await to_txn(ddl(710, 5, "X"), schema, KvDdlHistory(kv))
