"""The MySQL sink on a real tidb-server downstream (binlog off), with TiDB's transaction limits
lowered so they trigger with small batches: ``txn-total-size-limit`` 1 MiB and
``txn-entry-size-limit`` 256 KiB (TiDB's defaults are 100 MiB and 6 MiB).

Proves: the sink's sessions on TiDB run optimistic transactions, take explicit AUTO_RANDOM keys,
ignore placement options and read at no external snapshot, and the sink finds TiDB through
``mysql://`` as through ``tidb://``; a duplicate key, which an optimistic transaction reports
only at COMMIT, still names the upstream transaction that failed; a batch TiDB refuses for its
size is split between upstream transactions (every checkpoint on the way consistent), one
transaction too large alone is applied in pieces, and pieces interrupted (the write gate
refusing after the first) leave a ``consistent: false`` checkpoint from which a new sink
completes the transaction in safe mode; parallel workers split their transactions too; a row
larger than the entry limit fails the batch naming its transaction, not retriable; the
checkpoint table is the one tidb-binlog's statement makes on TiDB, and a DDL replayed without
its record (a fresh checkpoint, safe mode) is skipped by error code or index shape on TiDB.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncmy
import pytest

from tests.support.tidb import TidbServer, running_tidb
from tributary.change import Ddl, RowChange, TableInfo, Txn
from tributary.sinks import Sink, SinkError, SinkOptions, WriteRefused
from tributary.sinks.mysql.conn import ConnectParams, connect
from tributary.sinks.schemes import open_sink

pytestmark = pytest.mark.timeout(180)

TOTAL_LIMIT = 1 << 20
ENTRY_LIMIT = 256 << 10
BLOB = 100_000  # bytes of a row's value: ten rows pass TOTAL_LIMIT, one is under ENTRY_LIMIT
_cases = itertools.count()


@pytest.fixture(scope="module")
def tidb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidbServer]:
    limits = {"txn-total-size-limit": TOTAL_LIMIT, "txn-entry-size-limit": ENTRY_LIMIT}
    with running_tidb(tmp_path_factory.mktemp("tidb"), limits) as server:
        yield server


async def sql(tidb: TidbServer, text: str) -> list[tuple[Any, ...]]:
    conn = await asyncmy.connect(host=tidb.host, port=tidb.port, user=tidb.user, autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute(text)
            return [tuple(r) for r in await cur.fetchall()]
    finally:
        conn.close()


class Case:
    """A database and a checkpoint schema of one test's own on the module's TiDB."""

    def __init__(self, tidb: TidbServer) -> None:
        n = next(_cases)
        self.tidb = tidb
        self.db = f"db{n}"
        self.checkpoint = f"cp{n}"
        self.big = TableInfo.build(self.db, "big", [("id", "int"), ("b", "longblob")], ["id"])
        self.setup = [
            Txn(1, ddl=Ddl(self.db, f"CREATE DATABASE {self.db}")),
            Txn(2, ddl=Ddl(self.db, "CREATE TABLE big (id INT PRIMARY KEY, b LONGBLOB)")),
        ]

    def url(self, scheme: str = "tidb", options: str = "") -> str:
        t = self.tidb
        return f"{scheme}://root@{t.host}:{t.port}/?checkpoint-schema={self.checkpoint}{options}"

    @asynccontextmanager
    async def sink(self, options: str = "", *, safe_mode: bool = False) -> AsyncIterator[Sink]:
        async with open_sink(self.url(options=options), SinkOptions(1, safe_mode=safe_mode)) as s:
            yield s

    def rows(self, ts: int, ids: range) -> Txn:
        """A transaction inserting rows ``ids`` of ``BLOB`` bytes each into ``big``."""
        changes = [RowChange.insert(self.big, {"id": i, "b": bytes([i % 256]) * BLOB}) for i in ids]
        return Txn(ts, rows=tuple(changes))

    async def stored(self) -> list[tuple[int, int]]:
        """``(id, length of b)`` of every row of ``big``."""
        got = await sql(self.tidb, f"SELECT id, LENGTH(b) FROM {self.db}.big ORDER BY id")
        return [(int(i), int(n)) for i, n in got]

    async def saved(self) -> dict[str, Any]:
        [(text,)] = await sql(self.tidb, f"SELECT checkPoint FROM {self.checkpoint}.checkpoint")
        doc: dict[str, Any] = json.loads(text)
        return doc


@pytest.fixture
def case(tidb: TidbServer) -> Case:
    return Case(tidb)


def lengths(ids: range) -> list[tuple[int, int]]:
    return [(i, BLOB) for i in ids]


async def test_sessions_on_tidb(case: Case) -> None:
    session = await connect(ConnectParams(case.tidb.host, case.tidb.port, "root", ""))
    try:
        assert session.tidb
        [got] = await session.query(
            "SELECT @@tidb_txn_mode, @@allow_auto_random_explicit_insert,"
            " @@tidb_placement_mode, @@tidb_enable_external_ts_read, @@foreign_key_checks"
        )
        assert tuple(got) == ("optimistic", 1, "IGNORE", 0, 0)
    finally:
        await session.quit()


async def test_explicit_auto_random_keys_and_placement_options(case: Case) -> None:
    ar = TableInfo.build(case.db, "ar", [("id", "bigint"), ("v", "int")], ["id"])
    keys = (1 << 58) + 7, 12345  # as an upstream TiDB's AUTO_RANDOM made them
    create_ar = "CREATE TABLE ar (id BIGINT AUTO_RANDOM PRIMARY KEY, v INT)"
    placed = "CREATE TABLE placed (id INT PRIMARY KEY) PLACEMENT POLICY = upstream_only"
    async with open_sink(case.url("mysql"), SinkOptions(1)) as sink:  # TiDB by its version
        await sink.apply(
            [
                case.setup[0],
                Txn(3, ddl=Ddl(case.db, create_ar)),
                Txn(4, rows=tuple(RowChange.insert(ar, {"id": k, "v": 1}) for k in keys)),
            ]
        )
        await sink.apply([Txn(5, ddl=Ddl(case.db, placed))])  # a policy TiDB does not have
    got = await sql(case.tidb, f"SELECT id FROM {case.db}.ar ORDER BY id")
    assert [r[0] for r in got] == sorted(keys)
    assert await sql(case.tidb, f"SELECT * FROM {case.db}.placed") == []


async def test_a_duplicate_key_found_at_commit_names_its_transaction(case: Case) -> None:
    async with case.sink() as sink:
        await sink.apply([*case.setup, case.rows(10, range(1, 2))])
        with pytest.raises(SinkError, match=r"transaction at commit ts 30 failed") as e:
            # optimistic: TiDB finds id 1 taken only at COMMIT
            await sink.apply([case.rows(20, range(5, 6)), case.rows(30, range(1, 2))])
        assert not e.value.retriable
        assert await sink.checkpoint() == 10
    assert await case.stored() == lengths(range(1, 2))


async def test_a_batch_too_large_is_split_between_transactions(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    batch = [case.rows(10 + i, range(i * 4, i * 4 + 4)) for i in range(8)]  # 3.2 MB in all
    caplog.set_level(logging.WARNING, "tributary.sinks.mysql.sink")
    async with case.sink() as sink:
        await sink.apply(case.setup)
        await sink.apply(batch)
        assert await sink.checkpoint() == 17
    assert await case.stored() == lengths(range(32))
    assert any("too large for one transaction" in r.message for r in caplog.records)
    assert (await case.saved())["consistent"] is True


async def test_one_transaction_too_large_is_applied_in_pieces(case: Case) -> None:
    async with case.sink() as sink:
        await sink.apply(case.setup)
        await sink.apply([case.rows(10, range(30))])  # 3 MB: three times the limit
        assert await sink.checkpoint() == 10
    assert await case.stored() == lengths(range(30))
    saved = await case.saved()
    assert (saved["commitTS"], saved["consistent"]) == (10, True)


async def test_pieces_interrupted_are_completed_from_an_inconsistent_checkpoint(
    case: Case,
) -> None:
    calls = itertools.count(1)

    def gate() -> None:
        # 16 rows of 100 KB: 1, the whole (refused for its size); 2, the checkpoint marked;
        # 3 and 4, BEGIN and COMMIT of the first piece (8 rows); the second piece is refused
        if next(calls) >= 5:
            raise WriteRefused("fenced")

    txn = case.rows(10, range(16))
    async with case.sink() as sink:
        await sink.apply(case.setup)
        sink.write_gate = gate  # type: ignore[attr-defined]
        with pytest.raises(WriteRefused):
            await sink.apply([txn])
    assert await case.stored() == lengths(range(8))  # the first piece, beyond the checkpoint
    saved = await case.saved()
    assert (saved["commitTS"], saved["consistent"]) == (2, False)
    async with case.sink() as sink:  # not in safe mode: the checkpoint makes it so
        assert await sink.checkpoint() == 2
        await sink.apply([txn, case.rows(11, range(16, 17))])
    assert await case.stored() == lengths(range(17))
    saved = await case.saved()
    assert (saved["commitTS"], saved["consistent"]) == (11, True)


async def test_parallel_workers_split_their_transactions(case: Case) -> None:
    async with case.sink("&consistent=false&worker-count=2&batch-size=20") as sink:
        await sink.apply(case.setup)
        await sink.apply([case.rows(10, range(40)), case.rows(11, range(40, 45))])
        assert await sink.checkpoint() == 11
    assert await case.stored() == lengths(range(45))


async def test_a_row_over_the_entry_limit_fails_naming_its_transaction(case: Case) -> None:
    huge = RowChange.insert(case.big, {"id": 99, "b": b"x" * (ENTRY_LIMIT + 1000)})
    async with case.sink() as sink:
        await sink.apply(case.setup)
        with pytest.raises(SinkError, match=r"commit ts 20 failed: .*8025") as e:
            await sink.apply([case.rows(10, range(2)), Txn(20, rows=(huge,))])
        assert not e.value.retriable
        assert await sink.checkpoint() == 2
    assert await case.stored() == []


TIDB_BINLOG_CHECKPOINT = (  # tidb-binlog's drainer (pkg/loader, checkpoint/mysql.go)
    "CREATE TABLE IF NOT EXISTS {schema}.checkpoint"
    "(clusterID bigint unsigned primary key, checkPoint MEDIUMTEXT)"
)
COLUMNS = (
    "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY"
    " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{schema}' ORDER BY 1, ORDINAL_POSITION"
)


async def test_checkpoint_tables_and_ddl_replays(case: Case, tidb: TidbServer) -> None:
    acct = (
        "CREATE TABLE acct (id INT PRIMARY KEY, name VARCHAR(10))",
        "ALTER TABLE acct ADD COLUMN note VARCHAR(20)",
        "ALTER TABLE acct ADD INDEX (name)",
        "CREATE TABLE gone (id INT)",
        "DROP TABLE gone",
    )
    ddls = [case.setup[0], *(Txn(3 + i, ddl=Ddl(case.db, q)) for i, q in enumerate(acct))]
    async with case.sink() as sink:
        await sink.apply(ddls)
    ours = await sql(tidb, COLUMNS.format(schema=case.checkpoint))
    theirs = f"tb{next(_cases)}"
    await sql(tidb, f"CREATE DATABASE {theirs}")
    await sql(tidb, TIDB_BINLOG_CHECKPOINT.format(schema=theirs))
    expected = await sql(tidb, COLUMNS.format(schema=theirs))
    assert [r for r in ours if r[0] == "checkpoint"] == expected
    assert {r[0] for r in ours} == {"checkpoint", "checkpoint_ddl_ts"}

    # a fresh checkpoint elsewhere, safe mode: every DDL again, none with a record
    again = Case(tidb)
    again.db = case.db
    async with again.sink(safe_mode=True) as sink:
        await sink.apply(ddls)
        assert await sink.checkpoint() == 3 + len(acct) - 1
    indexes = await sql(
        tidb,
        "SELECT INDEX_NAME FROM information_schema.STATISTICS"
        f" WHERE TABLE_SCHEMA = '{case.db}' AND TABLE_NAME = 'acct' ORDER BY 1",
    )
    assert [r[0] for r in indexes] == ["PRIMARY", "name"]  # no name_2
