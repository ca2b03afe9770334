"""The MySQL/MariaDB change source against a real MariaDB (ROW binlog, FULL row metadata):
values of many column types, transactions, DDL mid-stream read by a lagging reader, resume
with the same timestamps, filters, a killed dump thread, the configuration check."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tributary.change import RowKind, TableFilter
from tributary.sources.mysql import (
    Position,
    SourceConfig,
    SourceError,
    SourceTxn,
    current_position,
    open_source,
)

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBServer

pytest_plugins = ["tests.support.mariadb"]

_dbs = itertools.count(1)
FULL_METADATA = ("--binlog-row-metadata=FULL", "--binlog-row-image=FULL")


@pytest.fixture(scope="module")
def server(mariadb_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.mariadb import running_server

    base = tmp_path_factory.mktemp("mysqlsource")
    with running_server(mariadb_template, base, FULL_METADATA) as srv:
        yield srv


@pytest.fixture
def db(server: MariaDBServer) -> Iterator[str]:
    name = f"src{next(_dbs)}"
    server.admin(f"CREATE DATABASE {name}")
    yield name
    server.admin(f"DROP DATABASE IF EXISTS {name}")


def config(server: MariaDBServer, **kw: Any) -> SourceConfig:
    return SourceConfig(server.host, server.port, server.user, server.password, **kw)


def only(db: str) -> TableFilter:
    return TableFilter(do_dbs=[db])


async def collect(
    cfg: SourceConfig, start: Position, until: Position, last_ts: int = 0
) -> list[SourceTxn]:
    """Every transaction from ``start`` up to ``until`` (a position read before)."""
    out: list[SourceTxn] = []
    async with asyncio.timeout(60), open_source(cfg, start, last_ts) as txns:
        async for st in txns:
            out.append(st)
            if (st.position.file, st.position.pos) >= (until.file, until.pos):
                break
    return out


async def run(server: MariaDBServer, db: str, *statements: str) -> None:
    async with server.connect(db) as conn, conn.cursor() as cur:
        for sql in statements:
            await cur.execute(sql)


def data(txns: list[SourceTxn]) -> list[SourceTxn]:
    return [t for t in txns if t.txn.rows or t.txn.ddl is not None]


TYPES_TABLE = """CREATE TABLE t (
  id int PRIMARY KEY, ti tinyint, tu tinyint unsigned, si smallint, mi mediumint,
  mu mediumint unsigned, bi bigint, bu bigint unsigned, f float, d double,
  dec1 decimal(10,2), dec2 decimal(30,10), c char(5), vc varchar(20), vb varbinary(10),
  bn binary(4), tx text, bl blob, e enum('a','b','c'), s set('x','y','z'), dt date,
  tm time(3), dtm datetime(6), ts timestamp(2) NULL, yr year, bt bit(10), j json
)"""

ROW_1 = {
    "id": 1,
    "ti": -128,
    "tu": 255,
    "si": -32768,
    "mi": -8388608,
    "mu": 16777215,
    "bi": -9223372036854775808,
    "bu": 18446744073709551615,
    "f": 1.1,
    "d": -2.25,
    "dec1": "-123.45",
    "dec2": "12345678901234567890.0123456789",
    "c": "ab",
    "vc": "héllo wörld",
    "vb": b"\x00\x01",
    "bn": b"ab\x00\x00",
    "tx": "long text ✓",
    "bl": b"\xff\x00",
    "e": "b",
    "s": "x,z",
    "dt": "2024-02-29",
    "tm": "-12:34:56.789",
    "dtm": "2024-02-29 10:00:05.123456",
    "ts": "2024-02-29 10:00:05.50",
    "yr": 2024,
    "bt": 641,
    "j": '{"a": 1}',
}
INSERT_1 = (
    "INSERT INTO t VALUES (1, -128, 255, -32768, -8388608, 16777215, -9223372036854775808,"
    " 18446744073709551615, 1.1, -2.25, -123.45, 12345678901234567890.0123456789, 'ab',"
    " 'héllo wörld', x'0001', 'ab', 'long text ✓', x'ff00', 'b', 'z,x', '2024-02-29',"
    " '-12:34:56.789', '2024-02-29 10:00:05.123456', '2024-02-29 10:00:05.50', 2024,"
    " b'1010000001', '{\"a\": 1}')"
)


async def test_values_of_many_types_and_transactions(server: MariaDBServer, db: str) -> None:
    cfg = config(server, filter=only(db))
    await run(server, db, TYPES_TABLE)
    start = await current_position(cfg)
    await run(server, db, INSERT_1, "INSERT INTO t (id) VALUES (2)")
    await run(server, db, "UPDATE t SET vc = 'changed', dec1 = 0.5 WHERE id = 1")
    await run(server, db, "DELETE FROM t WHERE id = 2")
    await run(
        server,
        db,
        "BEGIN",
        "INSERT INTO t (id, vc) VALUES (3, 'three')",
        "UPDATE t SET vc = 'drei' WHERE id = 3",
        "INSERT INTO t (id) VALUES (4)",
        "DELETE FROM t WHERE id = 3",
        "COMMIT",
    )
    end = await current_position(cfg)
    txns = data(await collect(cfg, start, end))
    assert [len(t.txn.rows) for t in txns] == [1, 1, 1, 1, 4]

    insert = txns[0].txn.rows[0]
    assert insert.kind is RowKind.INSERT
    assert dict(insert.values) == ROW_1
    nulls = txns[1].txn.rows[0].values
    assert nulls["id"] == 2 and all(v is None for k, v in nulls.items() if k != "id")

    info = insert.table
    assert (info.schema, info.table, info.primary_key) == (db, "t", ("id",))
    types = {c.name: c.mysql_type for c in info.columns}
    assert types == {
        "id": "int",
        "ti": "tinyint",
        "tu": "tinyint unsigned",
        "si": "smallint",
        "mi": "mediumint",
        "mu": "mediumint unsigned",
        "bi": "bigint",
        "bu": "bigint unsigned",
        "f": "float",
        "d": "double",
        "dec1": "decimal(10,2)",
        "dec2": "decimal(30,10)",
        "c": "char(5)",
        "vc": "varchar(20)",
        "vb": "varbinary(10)",
        "bn": "binary(4)",
        "tx": "text",
        "bl": "blob",
        "e": "enum('a','b','c')",
        "s": "set('x','y','z')",
        "dt": "date",
        "tm": "time(3)",
        "dtm": "datetime(6)",
        "ts": "timestamp(2)",
        "yr": "year",
        "bt": "bit(10)",
        "j": "longtext",
    }

    update = txns[2].txn.rows[0]
    assert update.kind is RowKind.UPDATE
    assert update.old_values is not None
    assert (update.old_values["vc"], update.values["vc"]) == ("héllo wörld", "changed")
    assert (update.old_values["dec1"], update.values["dec1"]) == ("-123.45", "0.50")
    assert txns[3].txn.rows[0].kind is RowKind.DELETE
    assert txns[3].txn.rows[0].values["id"] == 2

    multi = txns[4].txn.rows
    assert [(r.kind, r.values["id"], r.values["vc"]) for r in multi] == [
        (RowKind.INSERT, 3, "three"),
        (RowKind.UPDATE, 3, "drei"),
        (RowKind.INSERT, 4, None),
        (RowKind.DELETE, 3, "drei"),
    ]
    stamps = [t.txn.commit_ts for t in txns]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert all(t.txn.start_ts == t.txn.commit_ts - 1 for t in txns)
    assert txns[-1].position.gtid.count("-") == 2  # MariaDB's domain-server-sequence


async def test_ddl_mid_stream_lagging_reader_uses_the_schema_of_the_time(
    server: MariaDBServer, db: str
) -> None:
    cfg = config(server, filter=only(db))
    start = await current_position(cfg)
    await run(
        server,
        db,
        "CREATE TABLE t (id int PRIMARY KEY, a varchar(10))",
        "INSERT INTO t VALUES (1, 'one')",
        "ALTER TABLE t ADD COLUMN b int NOT NULL DEFAULT 7",
        "INSERT INTO t VALUES (2, 'two', 8)",
        "ALTER TABLE t DROP COLUMN a",
        "INSERT INTO t VALUES (3, 9)",
        "UPDATE t SET b = 10 WHERE id = 1",
    )
    end = await current_position(cfg)  # every DDL ran before the reader starts
    txns = data(await collect(cfg, start, end))
    kinds = [("ddl", t.txn.ddl.query.split()[0]) if t.txn.ddl else ("rows",) for t in txns]
    assert kinds == [
        ("ddl", "CREATE"),
        ("rows",),
        ("ddl", "ALTER"),
        ("rows",),
        ("ddl", "ALTER"),
        ("rows",),
        ("rows",),
    ]
    ddl = txns[2].txn.ddl
    assert ddl is not None and (ddl.schema, ddl.table) == (db, "t")
    rows = [t.txn.rows[0] for t in txns if t.txn.rows]
    assert [dict(r.values) for r in rows] == [
        {"id": 1, "a": "one"},
        {"id": 2, "a": "two", "b": 8},
        {"id": 3, "b": 9},
        {"id": 1, "b": 10},
    ]
    names = [r.table.column_names for r in rows]
    assert names == [("id", "a"), ("id", "a", "b"), ("id", "b"), ("id", "b")]
    assert rows[0].table != rows[1].table != rows[2].table == rows[3].table


async def test_resume_from_a_position_gives_the_same_txns_with_the_same_ts(
    server: MariaDBServer, db: str
) -> None:
    cfg = config(server, filter=only(db))
    start = await current_position(cfg)
    await run(server, db, "CREATE TABLE t (id int PRIMARY KEY, v int)")
    for i in range(6):
        await run(
            server,
            db,
            f"INSERT INTO t VALUES ({i}, {i})",
            f"UPDATE t SET v = v + 100 WHERE id = {i}",
        )
    end = await current_position(cfg)
    first = await collect(cfg, start, end, last_ts=5)
    assert len(data(first)) == 13
    for k in (0, 4, 9):
        resumed = await collect(cfg, first[k].position, end, last_ts=first[k].txn.commit_ts)
        assert resumed == first[k + 1 :]


async def test_filters_drop_rows_and_keep_positions_moving(server: MariaDBServer, db: str) -> None:
    cfg = config(server, filter=TableFilter(do_dbs=[db], ignore_tables=[(db, "~^tmp_")]))
    start = await current_position(cfg)
    await run(
        server,
        db,
        "CREATE TABLE keep (id int PRIMARY KEY)",
        "CREATE TABLE tmp_x (id int PRIMARY KEY)",
        "BEGIN",
        "INSERT INTO keep VALUES (1)",
        "INSERT INTO tmp_x VALUES (1)",
        "COMMIT",
        "INSERT INTO tmp_x VALUES (2)",
    )
    end = await current_position(cfg)
    txns = await collect(cfg, start, end)
    ours = [t for t in txns if t.position.pos > start.pos]
    assert [t.txn.ddl.table for t in ours if t.txn.ddl] == ["keep"]  # tmp_x's CREATE dropped
    mixed, only_tmp = ours[-2], ours[-1]
    assert [r.table.table for r in mixed.txn.rows] == ["keep"]
    assert only_tmp.txn.rows == () and only_tmp.txn.ddl is None  # a checkpoint-only marker
    assert (only_tmp.position.file, only_tmp.position.pos) == (end.file, end.pos)


async def test_killed_dump_thread_is_retriable_and_reopen_resumes(
    server: MariaDBServer, db: str
) -> None:
    cfg = config(server, filter=only(db), server_id=5151)
    await run(server, db, "CREATE TABLE t (id int PRIMARY KEY)")
    start = await current_position(cfg)
    await run(server, db, "INSERT INTO t VALUES (1)")
    last: SourceTxn | None = None
    async with asyncio.timeout(60), open_source(cfg, start) as txns:
        it = aiter(txns)
        last = await anext(it)
        assert [r.values["id"] for r in last.txn.rows] == [1]
        dumps = await server.query(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
        )
        assert len(dumps) == 1
        await server.execute(f"KILL {int(dumps[0][0])}")
        with pytest.raises(SourceError) as caught:
            await anext(it)
        assert caught.value.retriable
    await run(server, db, "INSERT INTO t VALUES (2)")
    end = await current_position(cfg)
    again = data(await collect(cfg, last.position, end, last.txn.commit_ts))
    assert [r.values["id"] for t in again for r in t.txn.rows] == [2]


async def test_open_checks_the_row_metadata_setting(server: MariaDBServer) -> None:
    cfg = config(server)
    server.admin("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        with pytest.raises(SourceError, match="binlog_row_metadata") as caught:
            async with open_source(cfg, await current_position(cfg)):
                pass
        assert not caught.value.retriable
    finally:
        server.admin("SET GLOBAL binlog_row_metadata = FULL")


async def test_unreachable_server_is_retriable(server: MariaDBServer) -> None:
    from tests.support.net import free_port

    cfg = SourceConfig("127.0.0.1", free_port(), "u", "p")
    with pytest.raises(SourceError) as caught:
        await current_position(cfg)
    assert caught.value.retriable


async def test_a_compressed_transaction_payload_gives_the_same_rows(
    server: MariaDBServer, db: str
) -> None:
    """MySQL's type-40 payload built around real MariaDB events: the rows, positions and ts
    read through it equal those of the plain events it wraps."""
    from tests.support.binlog_payload import file_events, payload_event, without_crc
    from tributary.sources.mysql import events as ev
    from tributary.sources.mysql.assemble import Assembler
    from tributary.sources.mysql.schema import SchemaTracker
    from tributary.sources.mysql.server import inspect

    cfg = config(server, filter=only(db))
    await run(server, db, "CREATE TABLE p (id int PRIMARY KEY, v varchar(20), j json)")
    start = await current_position(cfg)
    await run(
        server,
        db,
        "BEGIN",
        "INSERT INTO p VALUES (1, 'one', '[1]'), (2, 'two', NULL)",
        "UPDATE p SET v = 'deux' WHERE id = 2",
        "DELETE FROM p WHERE id = 1",
        "COMMIT",
    )
    end = await current_position(cfg)
    data = (server.base / "binlog" / start.file).read_bytes()
    events = file_events(data)
    fde = bytearray(events[0][1])
    fde[17] &= ~1  # LOG_EVENT_BINLOG_IN_USE_F: set on disk while the file is open, not in CRC
    txn = [e for off, e in events if start.pos <= off < end.pos]
    assert txn[0][4] == ev.MARIADB_GTID_EVENT and txn[-1][4] == ev.XID_EVENT

    info = await inspect(cfg)
    assert info.checksum and not info.compressed

    def assembler() -> Assembler:
        a = Assembler(
            Position(start.file, start.pos),
            0,
            SchemaTracker(info.charsets),
            only(db),
            checksum=True,
        )
        assert a.feed(bytes(fde)) is None
        return a

    def read(evs: list[bytes]) -> list[SourceTxn]:
        a = assembler()
        return [t for t in map(a.feed, evs) if t is not None]

    [plain] = read(txn)
    assert [r.kind for r in plain.txn.rows] == [
        RowKind.INSERT,
        RowKind.INSERT,
        RowKind.UPDATE,
        RowKind.DELETE,
    ]
    inner = [without_crc(e) for e in txn[1:]]
    head = ev.header(ev.check_crc32(txn[-1]))
    for compression in (0, 255):
        wrapped = payload_event(
            inner, ts=head[0], server_id=head[2], log_pos=head[4], compression=compression
        )
        [packed] = read([txn[0], wrapped])
        assert packed.txn.rows == plain.txn.rows
        assert (
            packed.position == plain.position == Position(start.file, end.pos, packed.position.gtid)
        )
        assert packed.txn.commit_ts == plain.txn.commit_ts


async def test_open_refuses_compressed_mariadb_binlog_events(server: MariaDBServer) -> None:
    cfg = config(server)
    server.admin("SET GLOBAL log_bin_compress = ON")
    try:
        with pytest.raises(SourceError, match="log_bin_compress") as caught:
            async with open_source(cfg, await current_position(cfg)):
                pass
        assert not caught.value.retriable
    finally:
        server.admin("SET GLOBAL log_bin_compress = OFF")
