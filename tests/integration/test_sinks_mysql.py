"""The MySQL sink on a real MariaDB: values, atomicity, compaction, parallel apply, DDL.

Each test gets a fresh database (the ``mariadb`` fixture) that holds its tables and, through
the ``checkpoint-schema`` option, its checkpoint table.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import SinkError, SinkOptions
from tributary.sinks.checkpoint import CheckpointRecord
from tributary.sinks.mysql.causality import Causality, keys_of
from tributary.sinks.mysql.sink import MysqlSink, open_url

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBDatabase

pytest_plugins = ["tests.support.mariadb"]

MODES = {"consistent": "consistent=true", "parallel": "consistent=false&worker-count=4"}


async def open_sink(
    db: MariaDBDatabase, query: str = "", *, cluster_id: int = 1, safe_mode: bool = False
) -> MysqlSink:
    url = (
        f"mysql://{db.user}:{db.password}@{db.host}:{db.port}/"
        f"?checkpoint-schema={db.name}&{query}".rstrip("&")
    )
    return await open_url(urlsplit(url), SinkOptions(cluster_id=cluster_id, safe_mode=safe_mode))


def ddl(ts: int, db: MariaDBDatabase, query: str) -> Txn:
    return Txn(ts, ts - 1, ddl=Ddl(db.name, query))


async def saved(db: MariaDBDatabase, cluster_id: int = 1) -> CheckpointRecord | None:
    rows = await db.query("SELECT checkPoint FROM checkpoint WHERE clusterID = %s", (cluster_id,))
    return CheckpointRecord.from_json(rows[0][0]) if rows else None


# -- every column type ------------------------------------------------------------------------

TYPES = [
    ("id", "int", "INT PRIMARY KEY"),
    ("ti", "tinyint", "TINYINT"),
    ("tu", "tinyint unsigned", "TINYINT UNSIGNED"),
    ("si", "smallint", "SMALLINT"),
    ("mi", "mediumint", "MEDIUMINT"),
    ("i", "int", "INT"),
    ("iu", "int unsigned", "INT UNSIGNED"),
    ("bi", "bigint", "BIGINT"),
    ("bu", "bigint unsigned", "BIGINT UNSIGNED"),
    ("dc", "decimal(65,30)", "DECIMAL(65,30)"),
    ("d2", "decimal(10,2)", "DECIMAL(10,2)"),
    ("f", "float", "FLOAT"),
    ("db", "double", "DOUBLE"),
    ("c", "char(10)", "CHAR(10)"),
    ("vc", "varchar(100)", "VARCHAR(100)"),
    ("tx", "text", "TEXT"),
    ("bl", "blob", "BLOB"),
    ("bn", "binary(4)", "BINARY(4)"),
    ("vb", "varbinary(10)", "VARBINARY(10)"),
    ("dd", "date", "DATE"),
    ("dtm", "datetime(6)", "DATETIME(6)"),
    ("ts", "timestamp(3)", "TIMESTAMP(3) NULL"),
    ("tm", "time(2)", "TIME(2)"),
    ("y", "year", "YEAR"),
    ("e", "enum('a','b','c')", "ENUM('a','b','c')"),
    ("st", "set('x','y','z')", "SET('x','y','z')"),
    ("bt", "bit(10)", "BIT(10)"),
    ("j", "json", "JSON"),
]
BIG_DECIMAL = "-12345678901234567890123456789012345.123456789012345678901234567890"
# What the translator sends (change.model), and what asyncmy reads back.
EXTREMES: list[tuple[Any, Any]] = [
    (1, 1),
    (-128, -128),
    (255, 255),
    (-32768, -32768),
    (-8388608, -8388608),
    (-(2**31), -(2**31)),
    (2**32 - 1, 2**32 - 1),
    (-(2**63), -(2**63)),
    (2**64 - 1, 2**64 - 1),
    (BIG_DECIMAL, Decimal(BIG_DECIMAL)),
    ("1.50", Decimal("1.50")),
    (1.5, 1.5),
    (-1.7976931348623157e308, -1.7976931348623157e308),
    ("ab", "ab"),
    ("héllo ☃ 😀 '\"%s", "héllo ☃ 😀 '\"%s"),
    ("line\nbreak 'q' \\ back\x00", "line\nbreak 'q' \\ back\x00"),
    (bytes(range(256)), bytes(range(256))),
    (b"\x00'\\", b"\x00'\\\x00"),
    (b"\xff\x00'\\", b"\xff\x00'\\"),
    ("2024-02-29", dt.date(2024, 2, 29)),
    ("2024-02-29 23:59:59.999999", dt.datetime(2024, 2, 29, 23, 59, 59, 999999)),
    ("2038-01-19 03:14:07.499", dt.datetime(2038, 1, 19, 3, 14, 7, 499000)),
    ("-838:59:59.00", -dt.timedelta(hours=838, minutes=59, seconds=59)),
    (2155, 2155),
    ("b", "b"),
    ("x,z", "x,z"),
    (1023, b"\x03\xff"),
    ('{"a": [1, 2.5, "x", null, true]}', '{"a": [1, 2.5, "x", null, true]}'),
]
LOWS: list[tuple[Any, Any]] = [
    (2, 2),
    *[(0, 0)] * 8,
    ("0.000000000000000000000000000001", Decimal("1E-30")),
    ("-0.01", Decimal("-0.01")),
    (-0.0, -0.0),
    (5e-324, 5e-324),
    ("", ""),
    ("", ""),
    ("", ""),
    (b"", b""),
    (b"", b"\x00" * 4),
    (b"", b""),
    ("1000-01-01", dt.date(1000, 1, 1)),
    ("1000-01-01 00:00:00.000000", dt.datetime(1000, 1, 1)),
    ("1970-01-01 00:00:01.000", dt.datetime(1970, 1, 1, 0, 0, 1)),
    ("838:59:59.99", dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=990000)),
    (1901, 1901),
    ("a", "a"),
    ("", ""),
    (0, b"\x00\x00"),
    ("[]", "[]"),
]


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_every_column_type_round_trips(mariadb: MariaDBDatabase, mode: str) -> None:
    table = TableInfo.build(mariadb.name, "types", [(n, t) for n, t, _ in TYPES], ["id"])
    create = "CREATE TABLE types (" + ", ".join(f"{n} {d}" for n, _, d in TYPES) + ")"
    names = [n for n, _, _ in TYPES]
    sent = [dict(zip(names, [v for v, _ in rows], strict=True)) for rows in (EXTREMES, LOWS)]
    nulls = {n: (3 if n == "id" else None) for n in names}
    changed = {**sent[1], "vc": "changed", "bl": b"\xfe"}
    async with await open_sink(mariadb, MODES[mode]) as sink:
        await sink.apply([ddl(10, mariadb, create)])
        await sink.apply(
            [
                Txn(20, rows=(RowChange.insert(table, sent[0]), RowChange.insert(table, nulls))),
                Txn(30, rows=(RowChange.insert(table, sent[1]),)),
            ]
        )
        await sink.apply([Txn(40, rows=(RowChange.update(table, sent[1], changed),))])
        assert await sink.checkpoint() == 40
    got = await mariadb.query(f"SELECT {', '.join(names)} FROM types ORDER BY id")
    want_low = [w for _, w in LOWS]
    want_low[names.index("vc")], want_low[names.index("bl")] = "changed", b"\xfe"
    assert got[0] == tuple(w for _, w in EXTREMES)
    assert got[1] == tuple(want_low)
    assert got[2] == (3, *[None] * (len(names) - 1))


async def test_timestamps_arrive_in_the_configured_zone(mariadb: MariaDBDatabase) -> None:
    t = TableInfo.build(mariadb.name, "z", [("id", "int"), ("ts", "timestamp")], ["id"])
    async with await open_sink(mariadb, "time-zone=%2B08:00") as sink:
        await sink.apply([ddl(10, mariadb, "CREATE TABLE z (id INT PRIMARY KEY, ts TIMESTAMP)")])
        await sink.apply(
            [Txn(20, rows=(RowChange.insert(t, {"id": 1, "ts": "2024-01-01 08:00:00"}),))]
        )
    # the shared server's zone is UTC
    assert await mariadb.query("SELECT ts FROM z") == [(dt.datetime(2024, 1, 1, 0, 0),)]


# -- consistent mode: all or nothing ------------------------------------------------------------


def acct(db: MariaDBDatabase, name: str = "acct") -> TableInfo:
    return TableInfo.build(
        db.name, name, [("id", "int"), ("u", "int"), ("bal", "int")], ["id"], {"uk": ["u"]}
    )


ACCT_DDL = "CREATE TABLE {} (id INT PRIMARY KEY, u INT UNIQUE, bal INT)"


def ins(t: TableInfo, *ids: int, bal: int = 0) -> tuple[RowChange, ...]:
    return tuple(RowChange.insert(t, {"id": i, "u": i, "bal": bal}) for i in ids)


async def test_a_failing_batch_leaves_nothing_visible(mariadb: MariaDBDatabase) -> None:
    t = acct(mariadb)
    missing = acct(mariadb, "missing")  # not created downstream
    async with await open_sink(mariadb) as sink:
        await sink.apply([ddl(10, mariadb, ACCT_DDL.format("acct"))])
        await sink.apply([Txn(20, rows=ins(t, 1))])
        cases = [  # (batch, the commit ts the error must name)
            ([Txn(30, rows=ins(t, *range(2, 500))), Txn(40, rows=ins(missing, 1))], 40),
            ([Txn(30, rows=ins(t, *range(2, 500))), Txn(40, rows=ins(t, 1))], 40),  # dup key
            ([Txn(30, rows=ins(t, 7)), Txn(40, rows=ins(t, 7)), Txn(50, rows=ins(t, 8))], 40),
        ]
        for batch, culprit in cases:
            with pytest.raises(SinkError, match=rf"commit ts {culprit} failed") as e:
                await sink.apply(batch)
            assert not e.value.retriable
            assert await sink.checkpoint() == 20
            assert await mariadb.query("SELECT id FROM acct") == [(1,)]
            record = await saved(mariadb)
            assert record is not None and record.commit_ts == 20
        await sink.apply([Txn(30, rows=ins(t, 2, 3))])  # still usable
    assert await mariadb.query("SELECT id FROM acct ORDER BY id") == [(1,), (2,), (3,)]


# -- compaction and parallel apply against a model ------------------------------------------------


def upstream_stretch(
    t: TableInfo, log: TableInfo, seed: int, n: int
) -> tuple[list[Txn], dict[int, tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Transactions an upstream with PRIMARY(id), UNIQUE(u) accepted (small key space: lots of
    reuse, key changes and unique values moving between rows), plus inserts and deletes on a
    table without keys; the final states."""
    rnd = random.Random(seed)
    rows: dict[int, dict[str, Any]] = {}
    logged: list[tuple[Any, ...]] = []
    txns: list[Txn] = []
    for ts in range(100, 100 + n):
        changes: list[RowChange] = []
        for _ in range(rnd.randint(1, 8)):
            new = {"id": rnd.randrange(12), "u": rnd.choice([None, *range(6)]), "bal": ts}
            old = rows.get(rnd.randrange(12))
            taken = {r["u"] for r in rows.values() if r is not old} - {None}
            if new["u"] in taken:
                continue
            if old is None and new["id"] not in rows:
                changes.append(RowChange.insert(t, new))
            elif old is not None and rnd.random() < 0.3:
                changes.append(RowChange.delete(t, rows.pop(old["id"])))
                continue
            elif old is not None and (new["id"] == old["id"] or new["id"] not in rows):
                changes.append(RowChange.update(t, rows.pop(old["id"]), new))
            else:
                continue
            rows[new["id"]] = new
        if rnd.random() < 0.5:
            entry = {"k": rnd.randrange(3), "v": ts}
            changes.append(RowChange.insert(log, entry))
            logged.append((entry["k"], entry["v"]))
        if logged and rnd.random() < 0.2:
            k, v = logged.pop(rnd.randrange(len(logged)))
            changes.append(RowChange.delete(log, {"k": k, "v": v}))
        txns.append(Txn(ts, ts - 1, rows=tuple(changes)))
    final = {i: (r["id"], r["u"], r["bal"]) for i, r in rows.items()}
    return txns, final, sorted(logged)


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_batches_end_where_the_upstream_did(mariadb: MariaDBDatabase, mode: str) -> None:
    """Consistent mode: compacted batches; parallel mode: causality dispatch with conflicts."""
    t, log = acct(mariadb), TableInfo.build(mariadb.name, "log", [("k", "int"), ("v", "int")])
    txns, final, logged = upstream_stretch(t, log, seed=7, n=400)
    causality, conflicts = Causality(4), 0
    for change in (c for txn in txns for c in txn.rows):
        if causality.assign(keys_of(change)) is None:
            conflicts += 1
            causality.reset()
            causality.assign(keys_of(change))
    assert conflicts > 10  # the stretch does exercise the parallel mode's flushes
    query = MODES[mode] + "&batch-size=3"
    async with await open_sink(mariadb, query) as sink:
        await sink.apply([ddl(10, mariadb, ACCT_DDL.format("acct"))])
        await sink.apply([ddl(11, mariadb, "CREATE TABLE log (k INT, v INT)")])
        for start in range(0, len(txns), 100):  # four batches, each ending in its own state
            await sink.apply(txns[start : start + 100])
        assert await sink.checkpoint() == txns[-1].commit_ts
    assert await mariadb.query("SELECT id, u, bal FROM acct ORDER BY id") == sorted(final.values())
    assert await mariadb.query("SELECT k, v FROM log ORDER BY k, v") == logged


async def test_large_compacted_batches_are_chunked(mariadb: MariaDBDatabase) -> None:
    t = acct(mariadb)
    many = [Txn(20 + i, rows=ins(t, *range(i * 500, (i + 1) * 500), bal=i)) for i in range(6)]
    moved = tuple(
        RowChange.update(t, {"id": i, "u": i, "bal": 0}, {"id": i + 10_000, "u": i, "bal": 9})
        for i in range(0, 1500)
    )
    async with await open_sink(mariadb) as sink:
        await sink.apply([ddl(10, mariadb, ACCT_DDL.format("acct"))])
        await sink.apply([*many, Txn(40, rows=moved)])  # 3000 inserts, 1500 of them moved
    [(count, low, high, total)] = await mariadb.query(
        "SELECT COUNT(*), MIN(id), MAX(id), SUM(bal) FROM acct"
    )
    assert (count, low, high) == (3000, 1500, 11_499)
    assert total == 1500 * 9 + 500 * (3 + 4 + 5)


# -- DDL ---------------------------------------------------------------------------------------


async def test_ddl_runs_between_the_rows_around_it(mariadb: MariaDBDatabase) -> None:
    t = acct(mariadb)
    wide = TableInfo.build(
        mariadb.name, "acct", [("id", "int"), ("u", "int"), ("bal", "int"), ("note", "text")],
        ["id"], {"uk": ["u"]},
    )  # fmt: skip
    async with await open_sink(mariadb) as sink:
        await sink.apply(
            [
                ddl(10, mariadb, ACCT_DDL.format("acct")),
                Txn(20, rows=ins(t, 1, 2)),
                ddl(30, mariadb, "ALTER TABLE acct ADD COLUMN note TEXT"),
                Txn(40, rows=(RowChange.insert(wide, {"id": 3, "u": 3, "bal": 0, "note": "n"}),)),
            ]
        )
        assert await sink.checkpoint() == 40
        with pytest.raises(SinkError, match=r"DDL at commit ts 60 .* failed") as e:
            await sink.apply([Txn(50, rows=ins(t, 4)), ddl(60, mariadb, "ALTER TABLE acct BOGUS")])
        assert not e.value.retriable
        assert await sink.checkpoint() == 50  # what came before the DDL is committed
    assert await mariadb.query("SELECT id, note FROM acct ORDER BY id") == [
        (1, None),
        (2, None),
        (3, "n"),
        (4, None),
    ]
    record = await saved(mariadb)
    assert record is not None and record.commit_ts == 50


async def test_a_replayed_ddl_is_skipped(mariadb: MariaDBDatabase) -> None:
    """A crash after each DDL but before its checkpoint: the DDL runs a second time."""
    other = f"{mariadb.name}_x"
    ddls = [
        Txn(10, ddl=Ddl(other, f"CREATE DATABASE `{other}`")),
        Txn(11, ddl=Ddl(other, "CREATE TABLE t (id INT PRIMARY KEY, a INT)")),
        Txn(12, ddl=Ddl(other, "ALTER TABLE t ADD COLUMN b INT")),
        Txn(13, ddl=Ddl(other, "ALTER TABLE t ADD INDEX ia (a)")),
        Txn(14, ddl=Ddl(other, "CREATE INDEX ib ON t (b)")),
        Txn(15, ddl=Ddl(other, "ALTER TABLE t DROP INDEX ia")),
        Txn(16, ddl=Ddl(other, "ALTER TABLE t DROP COLUMN a")),
        Txn(17, ddl=Ddl(other, "ALTER TABLE t CHANGE b c INT")),
        Txn(18, ddl=Ddl(other, "CREATE TABLE gone (id INT)")),
        Txn(19, ddl=Ddl(other, "DROP TABLE gone")),
        Txn(20, ddl=Ddl(other, f"DROP DATABASE `{other}`")),
        Txn(21, ddl=Ddl(other, "CREATE TABLE t2 (id INT)")),  # its database is gone: 1049
    ]
    try:
        for i, txn in enumerate(ddls):
            async with await open_sink(mariadb) as sink:
                await sink.apply([txn])
                if txn.commit_ts == 17:
                    cols = await mariadb.server.query(f"SHOW COLUMNS FROM `{other}`.t")
                    assert [c[0] for c in cols] == ["id", "c"]
            before = ddls[i - 1].commit_ts if i else 1
            await mariadb.execute(  # the crash: the checkpoint still before the DDL
                "UPDATE checkpoint SET checkPoint = %s", (CheckpointRecord(before).to_json(),)
            )
            async with await open_sink(mariadb) as sink:
                assert await sink.checkpoint() == before
                await sink.apply([txn])
                assert await sink.checkpoint() == txn.commit_ts
        assert await mariadb.server.query(f"SHOW DATABASES LIKE '{other}'") == []
    finally:
        await mariadb.server.execute(f"DROP DATABASE IF EXISTS `{other}`")


# -- checkpoint ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_reopen_reads_the_checkpoint_back(mariadb: MariaDBDatabase, mode: str) -> None:
    t = acct(mariadb)
    async with await open_sink(mariadb, MODES[mode]) as sink:
        assert await sink.checkpoint() is None
        await sink.apply([ddl(10, mariadb, ACCT_DDL.format("acct"))])
        await sink.apply([Txn(20, 19, rows=ins(t, 1), schema_version=7), Txn(25)])
    async with await open_sink(mariadb, MODES[mode]) as sink:
        assert await sink.checkpoint() == 25
        await sink.apply([Txn(20, rows=ins(t, 1)), Txn(30, rows=ins(t, 2))])  # 20: skipped
    async with await open_sink(mariadb, MODES[mode], cluster_id=2**64 - 1) as sink:
        assert await sink.checkpoint() is None  # another upstream cluster
    assert await saved(mariadb) == CheckpointRecord(30, consistent=True, schema_version=7)
    [(text,)] = await mariadb.query("SELECT checkPoint FROM checkpoint WHERE clusterID = 1")
    assert set(json.loads(text)) == {"consistent", "commitTS", "ts-map", "schema-version"}
    assert await mariadb.query("SELECT id FROM acct ORDER BY id") == [(1,), (2,)]


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_foreign_keys_downstream_do_not_get_in_the_way(
    mariadb: MariaDBDatabase, mode: str
) -> None:
    """REPLACE of a parent must not cascade to its children, and changes may be reordered
    across tables (a child pointing at a parent the batch inserts later)."""
    parent = TableInfo.build(mariadb.name, "parent", [("id", "int"), ("v", "int")], ["id"])
    child = TableInfo.build(mariadb.name, "child", [("id", "int"), ("p", "int")], ["id"])
    async with await open_sink(mariadb, MODES[mode], safe_mode=mode == "parallel") as sink:
        await sink.apply(
            [
                ddl(10, mariadb, "CREATE TABLE parent (id INT PRIMARY KEY, v INT)"),
                ddl(11, mariadb, "CREATE TABLE child (id INT PRIMARY KEY, p INT, "
                    "FOREIGN KEY (p) REFERENCES parent (id) ON DELETE CASCADE)"),
            ]
        )  # fmt: skip
        p1, p7 = {"id": 1, "v": 0}, {"id": 7, "v": 0}
        c1 = {"id": 1, "p": 1}
        await sink.apply(
            [Txn(20, rows=(RowChange.insert(parent, p1), RowChange.insert(child, c1)))]
        )
        await sink.apply(
            [
                Txn(30, rows=(RowChange.update(child, c1, {"id": 1, "p": 1}),)),
                Txn(40, rows=(RowChange.insert(parent, p7),)),
                Txn(50, rows=(RowChange.update(child, c1, {"id": 1, "p": 7}),)),
                Txn(60, rows=(RowChange.update(parent, p1, {"id": 1, "v": 5}),)),
                Txn(70, rows=(RowChange.insert(child, {"id": 2, "p": 1}),)),
            ]
        )
    assert await mariadb.query("SELECT id, v FROM parent ORDER BY id") == [(1, 5), (7, 0)]
    assert await mariadb.query("SELECT id, p FROM child ORDER BY id") == [(1, 7), (2, 1)]
