"""``pump://`` end to end: Txns (DDL, inserts/updates/deletes over many column types, a keyless
table) written through the sink into a real etcd and two real pump processes, read by a real
drainer process into SQLite, equal what went in; the sink is closed and reopened in the middle
and resumes from its checkpoint in etcd (a replayed batch writes nothing twice). A drainer whose
own downstream is ``pump://`` (a second pump cluster) exports its pump client's counters."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.pipeline import Pipeline, running_pipeline
from tributary.change import Ddl, RowChange, SqlValue, TableInfo, Txn
from tributary.sinks import SinkOptions
from tributary.sinks.checkpoint import CheckpointRecord, checkpoint_load
from tributary.sinks.pump.sink import checkpoint_key
from tributary.sinks.pump.types import column_type
from tributary.sinks.pump.values import typed
from tributary.sinks.schemes import open_sink
from tributary.sql import SQLITE

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(240)]

COLUMNS = [
    ("id", "int(11)"),
    ("name", "varchar(20)"),
    ("price", "decimal(10,2)"),
    ("at", "datetime(3)"),
    ("day", "date"),
    ("dur", "time(2)"),
    ("f", "double"),
    ("e", "enum('x','y')"),
    ("s", "set('a','b','c')"),
    ("j", "json"),
    ("bin", "varbinary(8)"),
    ("big", "bigint(20) unsigned"),
    ("flags", "bit(8)"),
    ("note", "text"),
]
ITEMS = TableInfo.build("shop", "items", COLUMNS, ["id"])
ITEMS_WIDE = TableInfo.build("shop", "items", [*COLUMNS, ("extra", "int")], ["id"])
LOG = TableInfo.build("shop", "log", [("a", "int"), ("b", "varchar(10)")])  # no key
CREATE_ITEMS = (
    "CREATE TABLE items (id int(11) NOT NULL, name varchar(20), price decimal(10,2),"
    " at datetime(3), day date, dur time(2), f double, e enum('x','y'), s set('a','b','c'),"
    " j json, bin varbinary(8), big bigint(20) unsigned, flags bit(8), note text,"
    " PRIMARY KEY (id))"
)


def item(i: int, **over: SqlValue) -> dict[str, SqlValue]:
    row: dict[str, SqlValue] = {
        "id": i,
        "name": f"it'em {i}",
        "price": "12.50",
        "at": "2024-02-29 10:00:00.500",
        "day": "2024-02-29",
        "dur": "-01:02:03.50",
        "f": 1.5,
        "e": "y",
        "s": "a,c",
        "j": '{"a": [1, "x"]}',
        "bin": b"\x00\x01",
        "big": 2**64 - 1,
        "flags": 5,
        "note": None,
    }
    return {**row, **over}


def first_half() -> list[Txn]:
    wide = [RowChange.insert(ITEMS, item(i, price=f"{i}.25")) for i in range(10, 60)]
    return [
        Txn(10, 9, ddl=Ddl("", "CREATE DATABASE shop")),
        Txn(11, 10, ddl=Ddl("shop", CREATE_ITEMS, "items")),
        Txn(12, 11, ddl=Ddl("shop", "CREATE TABLE log (a int, b varchar(10))", "log")),
        Txn(13, 12, rows=(RowChange.insert(ITEMS, item(1)), RowChange.insert(ITEMS, item(2)))),
        Txn(14, 13, rows=tuple(wide)),
        Txn(
            15,
            14,
            rows=(
                RowChange.update(ITEMS, item(1), item(1, price="0.01", note="n", s="")),
                RowChange.insert(LOG, {"a": 1, "b": "x"}),
                RowChange.insert(LOG, {"a": 2, "b": "y"}),
            ),
        ),
        *(Txn(ts, ts - 1, rows=(RowChange.delete(ITEMS, item(ts)),)) for ts in range(16, 40)),
    ]


def second_half() -> list[Txn]:
    return [
        Txn(40, 39, rows=(RowChange.update(LOG, {"a": 2, "b": "y"}, {"a": 3, "b": None}),)),
        Txn(41, 40, ddl=Ddl("shop", "ALTER TABLE items ADD COLUMN extra int", "items")),
        Txn(42, 41, rows=(RowChange.insert(ITEMS_WIDE, {**item(3), "extra": 42}),)),
        Txn(43, 42, rows=(RowChange.delete(LOG, {"a": 1, "b": "x"}),)),
        Txn(44, 43, rows=(RowChange.delete(ITEMS_WIDE, {**item(2), "extra": None}),)),
    ]


def expected() -> dict[str, list[dict[str, SqlValue]]]:
    items = [{**item(1, price="0.01", note="n", s=""), "extra": None}, {**item(3), "extra": 42}]
    kept = [*range(10, 16), *range(40, 60)]
    items += [{**item(i, price=f"{i}.25"), "extra": None} for i in kept]
    return {"shop__items": items, "shop__log": [{"a": 3, "b": None}]}


def read(db: Path, table: str, info: TableInfo) -> list[dict[str, object]]:
    types = {c.name: column_type(c.mysql_type) for c in info.columns}
    with sqlite3.connect(db) as conn:
        cur = conn.execute(f'SELECT * FROM "{table}"')
        names = [d[0] for d in cur.description]
        rows = [{n: typed(v, types[n]) for n, v in zip(names, r, strict=True)} for r in cur]
    return sorted(rows, key=repr)


def canonical(rows: list[dict[str, SqlValue]], info: TableInfo) -> list[dict[str, object]]:
    types = {c.name: column_type(c.mysql_type) for c in info.columns}
    return sorted(({n: typed(r.get(n), types[n]) for n in types} for r in rows), key=repr)


def drained_to(db: Path, cluster_id: int) -> int:
    if not db.exists():
        return 0
    statement = checkpoint_load(SQLITE, cluster_id)
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute(statement.sql, statement.args).fetchone()
    except sqlite3.OperationalError:
        return 0  # no checkpoint table yet
    return 0 if row is None else CheckpointRecord.from_json(row[0]).commit_ts


async def test_txns_through_pumps_and_a_drainer_into_sqlite(tmp_path: Path) -> None:
    replica = tmp_path / "replica.db"
    async with running_pipeline(tmp_path, pumps=2) as pipe:
        url = sink_url(pipe)
        first = await pipe.tso.get_ts()
        options = SinkOptions(cluster_id=pipe.cluster_id)
        async with open_sink(url, options) as sink:
            await sink.apply(first_half()[:5])
            await sink.apply(first_half()[5:])
            assert await sink.checkpoint() == 39
        async with open_sink(url, options) as sink:  # a restart: resumes after 39
            assert await sink.checkpoint() == 39
            await sink.apply([*first_half()[-3:], *second_half()])  # 37..39 are replays
            assert await sink.checkpoint() == 44
        stored = await pipe.kv.get(checkpoint_key("capture-1"))
        assert stored is not None and stored.value == b"44"
        last = await pipe.tso.get_ts()  # above every binlog the sink wrote

        start = ["--initial-commit-ts", str(first)]
        drainer = await pipe.cluster.start_drainer(f"sqlite://{replica}", extra=start)
        async with asyncio.timeout(90):
            while drained_to(replica, pipe.cluster_id) < last:
                assert drainer.child.running
                await asyncio.sleep(0.3)
        assert await drainer.child.stop(30) == 0

    want = expected()
    assert read(replica, "shop__items", ITEMS_WIDE) == canonical(want["shop__items"], ITEMS_WIDE)
    assert read(replica, "shop__log", LOG) == canonical(want["shop__log"], LOG)


def sink_url(pipe: Pipeline) -> str:
    etcd = pipe.cluster.etcd
    assert etcd is not None
    host = etcd.url.removeprefix("http://")
    return f"pump://{host}/?name=capture-1&cluster-id={pipe.cluster_id}"


async def drainer_pump_client_count(base: str, kind: str) -> float:
    """The drainer's ``binlog_drainer_pump_client_events_total{type=kind}``; 0 before it has
    the series."""
    async with aiohttp.ClientSession() as http, http.get(f"{base}/metrics") as r:
        r.raise_for_status()
        text = await r.text()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "binlog_drainer_pump_client_events_total" and s.labels["type"] == kind:
                return s.value
    return 0.0


async def test_a_drainer_into_another_pump_cluster_exports_its_pump_client_counters(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        running_pipeline(tmp_path / "a", pumps=1) as a,
        running_pipeline(tmp_path / "b", pumps=1) as b,
    ):
        first = await a.tso.get_ts()
        async with open_sink(sink_url(a), SinkOptions(cluster_id=a.cluster_id)) as sink:
            await sink.apply(first_half()[:4])  # 3 DDLs and a transaction of rows
        start = ["--initial-commit-ts", str(first)]
        drainer = await a.cluster.start_drainer(sink_url(b), extra=start)

        async def count(kind: str) -> float:
            return await drainer_pump_client_count(drainer.status_url, kind)

        async with asyncio.timeout(90):  # each of the 4 a prewrite and a commit into b's pump
            while await count("prewrites_ok") < 4 or await count("commits_ok") < 4:
                assert drainer.child.running
                await asyncio.sleep(0.3)
        assert await drainer.child.stop(30) == 0
