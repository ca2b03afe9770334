"""Values the workload generates survive every hop: stored text, TiDB's datum codec, and the
drainer's translator reading the binlog rows the workload builds (all four table shapes)."""

from __future__ import annotations

import datetime as dt
import functools
import random
from decimal import Decimal

import pytest

from services.drainer.item import PulledBinlogItem
from services.drainer.schema import SchemaTracker
from services.drainer.translate import to_txn
from tributary.change import RowKind
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import Action, DbInfo, DdlJob, KvDdlHistory, TableInfo, ddl_job
from tributary.sinks.pump.rows import DELETE, INSERT, UPDATE, MutationBuilder, row_id
from tributary.sinks.pump.values import duration_text, parse_duration, stored, typed
from tributary.tidbcodec import (
    EXTRA_HANDLE_ID,
    JSON_NULL,
    IntDatum,
    decode_deleted_row,
    decode_inserted_row,
    from_datum,
    to_datum,
)
from tributary.wire.binlog import Binlog, BinlogType, PrewriteValue
from tributary.workload import columns
from tributary.workload.catalog import Table
from tributary.workload.columns import build_table_info
from tributary.workload.mixed_tables import BASE
from tributary.workload.values import random_value

ALL_COLUMNS = [c for spec in BASE for c in spec.columns]
COMMIT = BinlogType(BinlogType.Commit)


@pytest.mark.parametrize("spec", ALL_COLUMNS, ids=lambda c: f"{c.name}:{c.sql}")
def test_generated_values_round_trip_text_and_datums(spec: columns.ColumnSpec) -> None:
    info = build_table_info(1, columns.TableSpec("t", (spec,)))
    (col,) = info.columns
    rng = random.Random(spec.name)
    for _ in range(300):
        v = random_value(rng, col)
        want = typed(v, col.ft)
        assert typed(stored(v, col.ft), col.ft) == want, v
        assert typed(from_datum(to_datum(v, col.ft), col.ft), col.ft) == want, v


def test_driver_and_text_forms_read_back_typed() -> None:
    by_name = {c.name: c.column_type for c in ALL_COLUMNS}
    assert typed(b"\x0f\xff", by_name["b"]) == 4095  # BIT from the MySQL driver
    assert typed("a,c", by_name["s"]) == frozenset({"a", "c"})
    assert typed("null", by_name["j"]) is JSON_NULL and typed(None, by_name["j"]) is None
    assert typed('{"a": [1]}', by_name["j"]) == {"a": [1]}
    assert typed("18446744073709551615", by_name["ub"]) == 2**64 - 1
    assert stored(2**64 - 1, by_name["ub"]) == "18446744073709551615"
    assert typed("1.5", by_name["d"]) == Decimal("1.500")
    assert stored(Decimal("1.500"), by_name["d"]) == "1.500"
    when = dt.datetime(2024, 2, 29, 10, 0, 0, 500000)
    assert stored(when, by_name["dt"]) == "2024-02-29 10:00:00.500"
    assert typed("2024-02-29 10:00:00.500", by_name["dt"]) == when
    assert typed(when, by_name["da"]) == dt.date(2024, 2, 29)
    assert stored(frozenset({"c", "a"}), by_name["s"]) == "a,c"


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (dt.timedelta(hours=-5, seconds=1, microseconds=500000), "-04:59:58.50"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), "838:59:59.00"),
        (dt.timedelta(0), "00:00:00.00"),
    ],
)
def test_durations(delta: dt.timedelta, text: str) -> None:
    assert duration_text(delta, 2) == text
    assert parse_duration(text) == delta


def _create(job_id: int, version: int, *, db: DbInfo, info: TableInfo, query: str) -> DdlJob:
    return ddl_job(job_id, Action.CREATE_TABLE, version, db, info, query)


async def _tables() -> tuple[KvDdlHistory, dict[str, Table]]:
    history = KvDdlHistory(MemoryKv())
    db = DbInfo(1, "mixed")
    await history.append_job(
        lambda v: ddl_job(1, Action.CREATE_SCHEMA, v, db, None, "CREATE DATABASE mixed")
    )
    tables = {}
    for i, spec in enumerate(BASE):
        info = build_table_info(10 + i, spec)
        await history.append_job(
            functools.partial(
                _create, 2 + i, db=db, info=info, query=columns.create_table_sql("mixed", spec)
            )
        )
        tables[spec.name] = Table("mixed", info)
    return history, tables


def _row(table: Table, rng: random.Random, key: int) -> dict[str, object]:
    row = {c.name: random_value(rng, c) for c in table.info.row_columns}
    first = table.info.row_columns[0].name  # the locator of every base table
    row[first] = key
    if "region" in row:
        row["region"] = "eu"
    return row


async def test_binlog_rows_translate_back_to_the_rows_written() -> None:
    history, tables = await _tables()
    rng = random.Random(42)
    builder = MutationBuilder()
    expected: list[tuple[RowKind, str, dict[str, object]]] = []
    for name, table in tables.items():
        a, b = _row(table, rng, 1), _row(table, rng, 2)
        builder.insert(table, a)
        builder.insert(table, b)
        changed = {
            **a,
            **{
                c: v
                for c, v in _row(table, rng, 1).items()
                if c not in ("id", "u", "n", "region", "c")
            },
        }
        builder.update(table, a, changed)
        builder.delete(table, b)
        expected += [
            (RowKind.INSERT, name, a),
            (RowKind.INSERT, name, b),
            (RowKind.UPDATE, name, changed),
            (RowKind.DELETE, name, b),
        ]
    sbtest = tables["sbtest"]
    moved_from = _row(sbtest, rng, 3)
    builder.insert(sbtest, moved_from)
    builder.update(sbtest, moved_from, {**moved_from, "id": 4})  # a new handle
    expected += [
        (RowKind.INSERT, "sbtest", moved_from),
        (RowKind.DELETE, "sbtest", moved_from),
        (RowKind.INSERT, "sbtest", {**moved_from, "id": 4}),
    ]

    value = builder.encode(schema_version=5)
    payload = bytes(Binlog(tp=COMMIT, start_ts=100, commit_ts=101, prewrite_value=value))
    txn = await to_txn(PulledBinlogItem(101, 100, payload, False), SchemaTracker(), history)
    assert txn.schema_version == 5 and builder.rows == len(txn.rows) == 19  # a move is 2 rows

    by_table: dict[str, list[tuple[RowKind, dict[str, object]]]] = {}
    for kind, name, row in expected:
        by_table.setdefault(name, []).append((kind, row))
    got: dict[str, list[tuple[RowKind, dict[str, object]]]] = {}
    for change in txn.rows:
        info = tables[change.table.table].info
        values = {c.name: typed(change.values[c.name], c.ft) for c in info.row_columns}
        got.setdefault(change.table.table, []).append((change.kind, values))
    for name, rows in by_table.items():
        info = tables[name].info
        want = [(k, {c.name: typed(r[c.name], c.ft) for c in info.row_columns}) for k, r in rows]
        assert got[name] == want, name
    assert list(got) == list(tables)  # one mutation per table, in first-write order


def test_layouts_handles_and_sequence() -> None:
    sbtest, nopk = (Table("m", build_table_info(i, s)) for i, s in ((1, BASE[0]), (2, BASE[1])))
    rng = random.Random(1)
    row = _row(sbtest, rng, 7)
    keyless = _row(nopk, rng, 9)
    builder = MutationBuilder()
    builder.insert(sbtest, row)
    builder.update(nopk, keyless, {**keyless, "qty": 1})
    builder.delete(nopk, keyless)
    assert builder.first_key == b"t1_r7"
    value = PrewriteValue().parse(builder.encode(3))
    first, second = value.mutations
    assert (first.table_id, list(first.sequence)) == (1, [INSERT])
    assert (second.table_id, list(second.sequence)) == (2, [UPDATE, DELETE])
    handle, cols = decode_inserted_row(first.inserted_rows[0])
    assert handle == [IntDatum(7)] and cols[1] == IntDatum(7)
    deleted = decode_deleted_row(second.deleted_rows[0])
    hidden = row_id(nopk, keyless)
    assert deleted[EXTRA_HANDLE_ID] == IntDatum(hidden)
    assert row_id(nopk, {**keyless, "qty": 1}) == hidden  # stable over non-key updates
