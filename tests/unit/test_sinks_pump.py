"""The ``pump://`` sink with in-memory ports: what it writes, read back by the drainer's own
translator (``to_txn`` with a fresh ``SchemaTracker`` over the same DDL history), equals what
went in; tables are registered once per layout; checkpoint and catalog survive a restart."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest

from services.drainer.item import PulledBinlogItem
from services.drainer.schema import SchemaTracker
from services.drainer.translate import to_txn
from tributary.change import Ddl, RowChange, SqlValue, TableInfo, Txn
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import Action, KvDdlHistory
from tributary.pumpclient import PumpClientError
from tributary.sinks import SinkError
from tributary.sinks.pump.sink import PumpSink, checkpoint_key, parse_url
from tributary.wire.binlog import Binlog, BinlogType

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
    ("yr", "year(4)"),
    ("flags", "bit(8)"),
    ("note", "text"),
]
T1 = TableInfo.build("shop", "items", COLUMNS, ["id"])
T1_WIDE = TableInfo.build("shop", "items", [*COLUMNS, ("extra", "int")], ["id"])
T2 = TableInfo.build("shop", "log", [("a", "int"), ("b", "varchar(10)")])  # no key
T3 = TableInfo.build(
    "shop", "codes", [("code", "varchar(8)"), ("n", "bigint")], ["code"], {"uk_n": ["n"]}
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
        "yr": 2024,
        "flags": 5,
        "note": None,
    }
    row.update(over)
    return row


@dataclass
class FakeTso:
    next_ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    async def get_ts(self) -> int:
        return next(self.next_ts)


@dataclass
class FakePumps:
    """Stores binlogs as a pump would hand them to a drainer (a commit carrying its
    prewrite's fields); ``fail_prewrites`` makes the next prewrites fail (as possibly stored
    somewhere when ``maybe_stored``)."""

    prewrites: dict[int, tuple[bytes, bytes, bytes, int]] = field(default_factory=dict)
    commits: dict[int, int] = field(default_factory=dict)
    rollbacks: list[int] = field(default_factory=list)
    fail_prewrites: int = 0
    maybe_stored: bool = False

    async def prewrite(
        self,
        start_ts: int,
        prewrite_value: bytes,
        prewrite_key: bytes = b"",
        ddl_query: bytes = b"",
        ddl_job_id: int = 0,
    ) -> None:
        if self.fail_prewrites:
            self.fail_prewrites -= 1
            raise PumpClientError(
                "pump unavailable", retriable=True, maybe_stored=self.maybe_stored
            )
        self.prewrites[start_ts] = (prewrite_value, prewrite_key, ddl_query, ddl_job_id)

    async def commit(self, start_ts: int, commit_ts: int) -> None:
        assert start_ts in self.prewrites and commit_ts > start_ts
        self.commits[start_ts] = commit_ts

    async def rollback(self, start_ts: int) -> None:
        self.rollbacks.append(start_ts)

    def pulled(self) -> list[PulledBinlogItem]:
        items = []
        for start, commit in sorted(self.commits.items(), key=lambda kv: kv[1]):
            value, key, query, job = self.prewrites[start]
            binlog = Binlog(
                tp=BinlogType(BinlogType.Commit),
                start_ts=start,
                commit_ts=commit,
                prewrite_key=key,
                prewrite_value=value,
                ddl_query=query,
                ddl_job_id=job,
            )
            items.append(PulledBinlogItem(commit, start, bytes(binlog), False))
        return items


async def drained(pumps: FakePumps, kv: MemoryKv) -> list[Txn]:
    """What a drainer makes of everything the pumps hold, markers left out."""
    tracker, history = SchemaTracker(), KvDdlHistory(kv)
    out = [await to_txn(i, tracker, history) for i in pumps.pulled()]
    return [t for t in out if t.rows or t.ddl is not None]


def shape(txns: list[Txn]) -> list[object]:
    """Txns as comparable data: DDL queries, and (kind, table, old, new values) per row."""
    out: list[object] = []
    for t in txns:
        if t.ddl is not None:
            out.append(("ddl", t.ddl.schema, t.ddl.query, t.ddl.table))
        else:
            out.append([(r.kind, r.table.qualified, r.old_values, dict(r.values)) for r in t.rows])
    return out


def batch_one() -> list[Txn]:
    return [
        Txn(10, 9, ddl=Ddl("", "CREATE DATABASE shop")),
        Txn(11, 10, ddl=Ddl("shop", "CREATE TABLE items (...)", "items")),
        Txn(12, 11, rows=(RowChange.insert(T1, item(1)), RowChange.insert(T1, item(2)))),
        Txn(13, 12),  # a checkpoint-only marker
        Txn(
            14,
            13,
            rows=(
                RowChange.update(T1, item(1), item(1, price="0.01", note="n", s="")),
                RowChange.insert(T2, {"a": 1, "b": "x"}),
                RowChange.insert(T2, {"a": 1, "b": "x"}),  # duplicates in a keyless table
                RowChange.insert(T3, {"code": "A1", "n": 7}),
            ),
        ),
        Txn(
            15,
            14,
            rows=(
                RowChange.delete(T1, item(2)),
                RowChange.update(T2, {"a": 1, "b": "x"}, {"a": 2, "b": None}),
                RowChange.update(T3, {"code": "A1", "n": 7}, {"code": "B2", "n": 8}),
            ),
        ),
    ]


def batch_two() -> list[Txn]:
    return [
        Txn(20, 19, ddl=Ddl("shop", "ALTER TABLE items ADD COLUMN extra int", "items")),
        Txn(21, 20, rows=(RowChange.insert(T1_WIDE, {**item(3), "extra": 42}),)),
        Txn(22, 21, rows=(RowChange.delete(T2, {"a": 1, "b": "x"}),)),
        Txn(
            23,
            22,
            rows=(RowChange.update(T1_WIDE, {**item(1), "extra": None}, {**item(1), "extra": 1}),),
        ),
    ]


def sink_on(kv: MemoryKv, pumps: FakePumps, tso: FakeTso, window: int = 128) -> PumpSink:
    return PumpSink(kv, tso, pumps, "feed-1", window=window)


async def test_rows_and_ddl_come_out_of_the_drainer_as_they_went_in() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(), FakeTso()
    sink = await sink_on(kv, pumps, tso, window=2).start()
    assert await sink.checkpoint() is None
    txns = batch_one() + batch_two()
    await sink.apply(txns[:6])
    assert await sink.checkpoint() == 15
    await sink.apply(txns[6:])
    assert await sink.checkpoint() == 23
    assert (await kv.get(checkpoint_key("feed-1"))).value == b"23"  # type: ignore[union-attr]

    out = await drained(pumps, kv)
    real = [t for t in txns if t.rows or t.ddl]
    # T2's update keeps its row id; T3's update changes a non-integer key: still an update.
    assert shape(out) == shape(real)
    assert [t.commit_ts for t in out] == sorted(t.commit_ts for t in out)
    assert not pumps.rollbacks


async def test_tables_are_registered_once_per_layout_with_stable_column_ids() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(), FakeTso()
    sink = await sink_on(kv, pumps, tso).start()
    await sink.apply(batch_one() + batch_two())
    jobs = await KvDdlHistory(kv).jobs_since(0)
    kinds = [(j.type, j.table_name) for j in jobs]
    assert kinds == [
        (Action.NONE, ""),  # CREATE DATABASE: the statement only
        (Action.NONE, "items"),
        (Action.CREATE_SCHEMA, ""),  # registered with the first row of shop.items
        (Action.CREATE_TABLE, "items"),
        (Action.CREATE_TABLE, "log"),
        (Action.CREATE_TABLE, "codes"),
        (Action.NONE, "items"),  # ALTER TABLE ... ADD COLUMN
        (Action.MODIFY_COLUMN, "items"),  # the new layout, seen in the next row
    ]
    assert [j.schema_version for j in jobs] == list(range(1, 9))
    created, altered = jobs[3].table_info, jobs[7].table_info
    assert created is not None and altered is not None and created.id == altered.id
    assert [c.id for c in altered.columns] == [c.id for c in created.columns] + [16]
    assert created.pk_is_handle and jobs[4].table_info and not jobs[4].table_info.pk_is_handle
    ddl_jobs = {j.id for j in jobs if j.type == Action.NONE}
    assert {p[3] for p in pumps.prewrites.values() if p[3]} == ddl_jobs


async def test_a_restarted_sink_resumes_after_its_checkpoint() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(), FakeTso()
    first = await sink_on(kv, pumps, tso).start()
    await first.apply(batch_one())
    await first.close()
    written, jobs = len(pumps.prewrites), len(await KvDdlHistory(kv).jobs_since(0))

    again = await sink_on(kv, pumps, tso).start()
    assert await again.checkpoint() == 15
    await again.apply(batch_one())  # a replay of what the checkpoint covers: dropped
    assert len(pumps.prewrites) == written
    replay_and_more = [*batch_one()[4:], *batch_two()]
    await again.apply(replay_and_more)
    assert await again.checkpoint() == 23
    # Known tables were not registered again: only the ALTER's two jobs are new.
    assert len(await KvDdlHistory(kv).jobs_since(0)) == jobs + 2
    assert shape(await drained(pumps, kv)) == shape(
        [t for t in batch_one() + batch_two() if t.rows or t.ddl]
    )


async def test_two_sinks_share_the_catalog() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(), FakeTso()
    a = await PumpSink(kv, tso, pumps, "a").start()
    b = await PumpSink(kv, tso, pumps, "b").start()  # read the history before a wrote
    await a.apply([Txn(5, 4, rows=(RowChange.insert(T2, {"a": 1, "b": "x"}),))])
    await b.apply([Txn(5, 4, rows=(RowChange.insert(T2, {"a": 2, "b": "y"}),))])
    narrow = TableInfo.build("shop", "log", [("a", "int")])
    await b.apply([Txn(6, 5, rows=(RowChange.insert(narrow, {"a": 3}),))])
    await a.apply([Txn(6, 5, rows=(RowChange.insert(T2, {"a": 4, "b": "z"}),))])
    jobs = await KvDdlHistory(kv).jobs_since(0)
    assert [j.type for j in jobs] == [
        Action.CREATE_SCHEMA,
        Action.CREATE_TABLE,  # b found a's registration instead of making its own
        Action.MODIFY_COLUMN,  # b's narrow layout
    ]  # a still writes at version 2, where shop.log has a's layout: nothing to register
    rows = [dict(r.values) for t in await drained(pumps, kv) for r in t.rows]
    # a's last row, at version 2 after b's layout at version 3 was shown downstream, is written
    # as the downstream has the table then (as a TiDB transaction committing after a DDL is)
    assert rows == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3}, {"a": 4}]
    assert await a.checkpoint() == await b.checkpoint() == 6


async def test_a_failed_prewrite_rolls_back_and_moves_no_checkpoint() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(fail_prewrites=1), FakeTso()
    sink = await sink_on(kv, pumps, tso).start()
    txns = [Txn(i, i - 1, rows=(RowChange.insert(T2, {"a": i, "b": None}),)) for i in (2, 3, 4)]
    with pytest.raises(SinkError) as e:
        await sink.apply(txns)
    assert e.value.retriable and not pumps.commits
    # the failed prewrite (the first) is certainly nowhere: no rollback for it; the other two
    # (stored, or cancelled with it) get theirs
    assert pumps.rollbacks == [1001, 1002]  # start ts 1000, 1001, 1002
    assert await sink.checkpoint() is None and await kv.get(checkpoint_key("feed-1")) is None
    await sink.apply(txns)  # the caller's retry
    assert [dict(r.values)["a"] for t in await drained(pumps, kv) for r in t.rows] == [2, 3, 4]


async def test_a_failed_prewrite_that_no_pump_may_hold_gets_no_rollback() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(fail_prewrites=1), FakeTso()
    sink = await sink_on(kv, pumps, tso).start()
    with pytest.raises(SinkError):
        await sink.apply([Txn(2, 1, rows=(RowChange.insert(T2, {"a": 2, "b": None}),))])
    assert pumps.rollbacks == [] and not pumps.prewrites


async def test_a_failed_prewrite_that_a_pump_may_hold_is_rolled_back() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(fail_prewrites=2, maybe_stored=True), FakeTso()
    sink = await sink_on(kv, pumps, tso).start()
    with pytest.raises(SinkError):
        await sink.apply([Txn(2, 1, rows=(RowChange.insert(T2, {"a": 2, "b": None}),))])
    assert len(pumps.rollbacks) == 1 and not pumps.prewrites
    with pytest.raises(SinkError):  # a DDL binlog likewise
        await sink.apply([Txn(3, 2, ddl=Ddl("shop", "CREATE TABLE t9 (a int)", "t9"))])
    assert len(pumps.rollbacks) == 2 and not pumps.prewrites


async def test_values_that_do_not_fit_are_not_retriable() -> None:
    kv, pumps, tso = MemoryKv(), FakePumps(), FakeTso()
    sink = await sink_on(kv, pumps, tso).start()
    bad = Txn(2, 1, rows=(RowChange.insert(T1, item(1, day="not a date")),))
    with pytest.raises(SinkError, match=r"insert on shop\.items") as e:
        await sink.apply([bad])
    assert not e.value.retriable and not pumps.prewrites
    geo = TableInfo.build("shop", "g", [("p", "geometry")])
    with pytest.raises(SinkError, match="geometry") as e:
        await sink.apply([Txn(3, 2, rows=(RowChange.insert(geo, {"p": b""}),))])
    assert not e.value.retriable


def test_url() -> None:
    cfg = parse_url(urlsplit("pump://127.0.0.1:2379,10.0.0.2:2379/?name=cf1&cluster-id=7"))
    assert cfg.endpoints == ("http://127.0.0.1:2379", "http://10.0.0.2:2379")
    assert (cfg.name, cfg.cluster_id, cfg.security.tls_enabled) == ("cf1", 7, False)
    assert parse_url(urlsplit("pump://h:1/?name=x")).cluster_id is None
    with pytest.raises(SinkError) as e:
        parse_url(urlsplit("pump:///?cluster-id=x&ssl-cert=/nonexistent&colour=red"))
    for problem in ("colour", "no etcd endpoint", "name= is required", "cluster-id", "ssl-key"):
        assert problem in str(e.value)
