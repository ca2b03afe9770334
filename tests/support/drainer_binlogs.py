"""Pulled binlogs as TiDB writes them (rows in TiDB's codec, DDL binlogs naming a job) and an in-
memory DDL history holding their jobs, for the drainer's translator, syncer and history tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal

from services.drainer.item import PulledBinlogItem
from tests.support.ddl_jobs import (
    PK_INT,
    VARCHAR,
    col,
    table,
)
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import DdlJob, KvDdlHistory, TableInfo
from tributary.tidbcodec import (
    ColumnType,
    Datum,
    IntDatum,
    encode_inserted_row,
    to_datum,
)
from tributary.tidbcodec import mysqltypes as mt
from tributary.wire.binlog import Binlog, BinlogType, MutationType, PrewriteValue, TableMutation

CST = dt.timezone(dt.timedelta(hours=8))


COMMIT = BinlogType(BinlogType.Commit)


INS = MutationType(MutationType.Insert)


UPD = MutationType(MutationType.Update)


DEL = MutationType(MutationType.DeleteRow)


TYPES = table(
    100,
    "types",
    [
        col(1, "id", PK_INT),
        col(2, "u64", ColumnType(mt.TYPE_LONGLONG, flag=mt.UNSIGNED_FLAG, flen=20)),
        col(3, "i8", ColumnType(mt.TYPE_TINY, flen=4)),
        col(4, "dec", ColumnType(mt.TYPE_NEWDECIMAL, flen=10, decimal=2)),
        col(5, "vc", VARCHAR),
        col(6, "bl", ColumnType(mt.TYPE_BLOB, flag=mt.BINARY_FLAG, charset="binary")),
        col(7, "dtm", ColumnType(mt.TYPE_DATETIME, decimal=3)),
        col(8, "d", ColumnType(mt.TYPE_DATE)),
        col(9, "tm", ColumnType(mt.TYPE_DURATION, decimal=0)),
        col(10, "j", ColumnType(mt.TYPE_JSON, charset="binary")),
        col(11, "e", ColumnType(mt.TYPE_ENUM, elems=("red", "green"))),
        col(12, "st", ColumnType(mt.TYPE_SET, elems=("a", "b", "c"))),
        col(13, "bt", ColumnType(mt.TYPE_BIT, flen=8, flag=mt.UNSIGNED_FLAG)),
        col(14, "dbl", ColumnType(mt.TYPE_DOUBLE)),
        col(15, "ts", ColumnType(mt.TYPE_TIMESTAMP, decimal=0)),
        col(16, "tm2", ColumnType(mt.TYPE_DURATION, decimal=2)),
    ],
)


TYPES_ROW = {
    "id": 7,
    "u64": 2**64 - 1,
    "i8": -128,
    "dec": Decimal("-1234.5"),
    "vc": "héllo ✓",
    "bl": b"\x00\xff",
    "dtm": dt.datetime(2024, 2, 29, 10, 0, 0, 500000),
    "d": dt.date(999, 12, 31),
    "tm": -dt.timedelta(hours=838, minutes=59, seconds=59),
    "j": {"b": True, "a": [1, "x", None]},
    "e": "green",
    "st": frozenset({"c", "a"}),
    "bt": 0b1010,
    "dbl": 1.5,
    "ts": dt.datetime(2024, 1, 1, 12, 0, 0),  # in CST, stored as 04:00 UTC
    "tm2": dt.timedelta(seconds=1, microseconds=500000),
}


TYPES_SENT = {
    "id": 7,
    "u64": 2**64 - 1,
    "i8": -128,
    "dec": "-1234.50",
    "vc": "héllo ✓",
    "bl": b"\x00\xff",
    "dtm": "2024-02-29 10:00:00.500",
    "d": "0999-12-31",
    "tm": "-838:59:59",
    "j": '{"a": [1, "x", null], "b": true}',
    "e": "green",
    "st": "a,c",
    "bt": 10,
    "dbl": 1.5,
    "ts": "2024-01-01 12:00:00",
    "tm2": "00:00:01.50",
}


def cols_of(info: TableInfo, values: Mapping[str, object]) -> list[tuple[int, Datum]]:
    """Column id -> datum pairs, as TiDB's writer encodes a row of ``info``."""
    by_name = {c.name: c for c in info.columns}
    return [(by_name[n].id, to_datum(v, by_name[n].ft, CST)) for n, v in values.items()]


def insert(info: TableInfo, values: Mapping[str, object]) -> bytes:
    handle = values["id"]
    assert isinstance(handle, int)
    return encode_inserted_row([IntDatum(handle)], cols_of(info, values))


def mutation(table_id: int, *rows: tuple[MutationType, bytes]) -> TableMutation:
    m = TableMutation(table_id=table_id)
    for kind, row in rows:
        {
            INS: m.inserted_rows,
            UPD: m.updated_rows,
            DEL: m.deleted_rows,
        }[kind].append(row)
        m.sequence.append(kind)
    return m


def dml(ts: int, version: int, *mutations: TableMutation) -> PulledBinlogItem:
    pv = PrewriteValue(schema_version=version, mutations=list(mutations))
    b = Binlog(tp=COMMIT, start_ts=ts - 1, commit_ts=ts, prewrite_value=bytes(pv))
    return PulledBinlogItem(ts, ts - 1, bytes(b), False)


def ddl(ts: int, job_id: int, query: str = "", state: int = 0) -> PulledBinlogItem:
    b = Binlog(
        tp=COMMIT,
        start_ts=ts - 1,
        commit_ts=ts,
        ddl_job_id=job_id,
        ddl_query=query.encode(),
        ddl_schema_state=state,
    )
    return PulledBinlogItem(ts, ts - 1, bytes(b), False)


async def history_with(*jobs: DdlJob) -> KvDdlHistory:
    history = KvDdlHistory(MemoryKv())
    for j in jobs:
        await history.put_job(j)
    return history
