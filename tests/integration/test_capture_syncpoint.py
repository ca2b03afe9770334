"""Sync points for real: etcd, two ``binlog-cdc server`` processes, MariaDB at both ends.

A changefeed with ``enable-sync-point = true`` and TiCDC's shortest interval (30 s; the CLI
refuses a shorter one, as TiCDC) is spread over the two captures, under a write load of
transactions each inserting a sequence number into ``shop.ops`` and writing one to three of
``shop.a``, ``shop.b``, ``shop.c`` (upserts and deletes on a small key space), so nearly every
transaction spans both captures.

What a sync point means is checked on the downstream itself: a trigger on
``tidb_cdc.syncpoint_v1`` copies the replicated tables into an audit table inside the very
transaction that inserts the sync point row (a consistent read: the downstream runs READ
COMMITTED, as TiCDC's sink does), i.e. the downstream as it was when the row was written. Each
copy must be the upstream's state after exactly the transactions with commit ts <= the row's
``primary_ts``: its sequence numbers 1..n with n the number of upstream transactions at or
below it (their commit ts read back from the upstream binlog, as the capture assigns them),
and ``a``, ``b``, ``c`` as the first n transactions leave them. So that a capture really is
behind when a point comes, the test locks a table held by the capture without ``#ddl``
downstream from 2 s before a point to 3 s after it: that capture cannot apply anything in
between. A row written while one capture had applied less (the lock), or more, than the
other fails the check, as does one written a transaction early or late. Proves too: rows come
every 30 s on the interval's multiples with ``secondary_ts`` ``'0'`` (MariaDB), and a row of
this changefeed older than the 1 h retention is deleted while a younger one and another
changefeed's stay.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from services.capture.rules import table_filter
from tests.support.capture import ROOT, Captures, shop_equal, wait_for, wait_owner
from tributary.sources.mysql import Position, SourceConfig, open_source
from tributary.wire.ts import LOGICAL_BITS, from_seconds, logical, physical_ms

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.mariadb import InstanceFactory, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = pytest.mark.timeout(300)

TABLES = ("a", "b", "c")
INTERVAL_MS = 30_000
Op = tuple[str, str, int]  # table, "put" or "delete", id
State = dict[str, dict[int, int]]  # table -> id -> v

TRIGGER = """
CREATE TRIGGER tidb_cdc.audit_snapshot AFTER INSERT ON tidb_cdc.syncpoint_v1 FOR EACH ROW
BEGIN
    INSERT INTO audit.taken VALUES (NEW.primary_ts);
    INSERT INTO audit.snap SELECT NEW.primary_ts, 'ops', k, 0 FROM shop.ops;
    INSERT INTO audit.snap SELECT NEW.primary_ts, 'a', id, v FROM shop.a;
    INSERT INTO audit.snap SELECT NEW.primary_ts, 'b', id, v FROM shop.b;
    INSERT INTO audit.snap SELECT NEW.primary_ts, 'c', id, v FROM shop.c;
END
"""


async def test_sync_points_are_consistent_snapshots_of_the_upstream(
    etcd: EtcdProcess, tmp_path: Path, mariadb_instance: InstanceFactory
) -> None:
    up = mariadb_instance("up", "--binlog-row-metadata=FULL")
    down = mariadb_instance("down", "--transaction-isolation=READ-COMMITTED")
    c = Captures(etcd, up.dsn() + "?server-id=4242", tmp_path)
    try:
        await _run(c, up, down, tmp_path)
    finally:
        for proc in c.procs.values():
            proc.kill()
            proc.wait()


def _cli(c: Captures, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.capture", "cli", "--server", c.any_server(), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _run(c: Captures, up: MariaDBServer, down: MariaDBServer, tmp: Path) -> None:
    c.start("c0")
    c.start("c1")
    await wait_owner(c, 60)
    for db in (up, down):
        await db.execute("CREATE DATABASE shop")
        await db.execute("CREATE TABLE shop.ops (k INT PRIMARY KEY)")
        for t in TABLES:
            await db.execute(f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v INT)")

    short = tmp / "short.toml"
    short.write_text('enable-sync-point = true\nsync-point-interval = "10s"\n')
    refused = _cli(c, "changefeed", "create", "-c", "cf-0", "--sink-uri", down.dsn(),
                   "--config", str(short))  # fmt: skip
    assert refused.returncode == 1 and "must be at least 30s" in refused.stderr, refused

    [(file, pos, *_)] = await up.query("SHOW MASTER STATUS")
    start_ts, start = from_seconds(time.time()), f"{file}:{pos}"
    config = tmp / "cf.toml"
    config.write_text(
        'enable-sync-point = true\nsync-point-interval = "30s"\nsync-point-retention = "1h"\n'
    )
    created = c.cli("changefeed", "create", "-c", "cf-1", "--sink-uri", down.dsn(),
                    "--start-ts", str(start_ts), "--source-position", start,
                    "--config", str(config))  # fmt: skip
    assert created["config"]["enable_sync_point"] is True, created
    assert created["config"]["sync_point_interval"] == 30_000_000_000, created

    async def table_made() -> bool:
        rows = await down.query(
            "SELECT 1 FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = 'tidb_cdc' AND TABLE_NAME = 'syncpoint_v1'"
        )
        return bool(rows)

    await wait_for(table_made, 60, "tidb_cdc.syncpoint_v1 created downstream")
    for cluster, feed, primary, age in (
        ("default", "cf-1", "1", "2 HOUR"),  # past the 1 h retention: deleted
        ("default", "cf-1", "2", "30 MINUTE"),  # within it: kept
        ("default", "cf-9", "3", "2 HOUR"),  # another changefeed's: kept
    ):
        await down.execute(
            f"INSERT INTO tidb_cdc.syncpoint_v1 VALUES (%s, %s, %s, '0', NOW() - INTERVAL {age})",
            (cluster, feed, primary),
        )
    await down.execute("CREATE DATABASE audit")
    await down.execute("CREATE TABLE audit.taken (primary_ts VARCHAR(18) PRIMARY KEY)")
    await down.execute(
        "CREATE TABLE audit.snap (primary_ts VARCHAR(18), tbl VARCHAR(8), id INT, v INT)"
    )
    await down.execute(TRIGGER)

    lagging = await wait_for(lambda: _lagging_table(c), 60, "the tables spread over c0 and c1")

    stop = asyncio.Event()
    ops: list[list[Op]] = []
    load = asyncio.create_task(_load(up, stop, ops), name="load")
    try:
        held = await _hold_across_a_point(down, lagging)

        async def two_taken() -> list[int] | None:
            rows = await down.query("SELECT primary_ts FROM audit.taken")
            taken = sorted(int(r[0]) for r in rows)
            return taken if held in taken and len(taken) >= 2 else None

        taken = await wait_for(two_taken, 90, "the held point and another taken by the trigger")
    finally:
        stop.set()
        await load
    await wait_for(lambda: shop_equal(up, down, 1 + len(TABLES)), 60, "the downstream caught up")

    stamps = await _commit_ts(up, start, start_ts, len(ops))
    assert stamps == sorted(stamps), "one connection: commit order is sequence order"
    for point in taken:
        assert logical(point) == 0 and physical_ms(point) % INTERVAL_MS == 0
        n = sum(1 for ts in stamps if ts <= point)
        assert 0 < n < len(ops), f"sync point {point} not in the middle of the load ({n})"
        snap = await down.query(
            "SELECT tbl, id, v FROM audit.snap WHERE primary_ts = %s", (str(point),)
        )
        seen = sorted(int(id_) for tbl, id_, _ in snap if tbl == "ops")
        assert seen == list(range(1, n + 1)), (
            f"sync point {point}: the downstream held sequence numbers {seen[:3]}..{seen[-3:]} "
            f"({len(seen)}), the upstream {n} at or below it"
        )
        state: State = {t: {} for t in TABLES}
        for tbl, id_, v in snap:
            if tbl != "ops":
                state[str(tbl)][int(id_)] = int(v)
        assert state == _replay(ops[:n]), f"sync point {point}: tables differ from the upstream"

    rows = await down.query(
        "SELECT ticdc_cluster_id, changefeed, primary_ts, secondary_ts"
        " FROM tidb_cdc.syncpoint_v1 ORDER BY changefeed, CAST(primary_ts AS UNSIGNED)"
    )
    ours = [r for r in rows if r[1] == "cf-1" and r[2] not in ("1", "2")]
    assert {(r[0], r[3]) for r in ours} == {("default", "0")}
    points = [int(r[2]) for r in ours]
    assert set(taken) <= set(points)
    steps = {b - a for a, b in itertools.pairwise(points)}
    assert steps == {INTERVAL_MS << LOGICAL_BITS}, "a point every 30 s, none skipped"
    others = [tuple(r[1:3]) for r in rows if r[2] in ("1", "2", "3")]
    assert others == [("cf-1", "2"), ("cf-9", "3")], "retention: only the expired row is gone"


async def _lagging_table(c: Captures) -> str | None:
    """A table whose span runs on the capture without ``#ddl`` (None until spread)."""
    data = await asyncio.to_thread(c.cli, "capture", "list")
    held = {i["id"]: {s for v in i["tables"].values() for s in v} for i in data["items"]}
    if len(held) != 2 or not all(held.values()):
        return None
    (other,) = [spans for spans in held.values() if "#ddl" not in spans]
    return str(sorted(other)[0])


async def _hold_across_a_point(down: MariaDBServer, table: str) -> int:
    """Lock every row and gap of ``table`` downstream from 2 s before the next point (at least
    5 s away) to 3 s after it; that point."""
    point = (int(time.time() + 5) // 30 + 1) * 30
    await asyncio.sleep(point - 2 - time.time())
    async with down.connect() as conn, conn.cursor() as cur:
        await cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        await cur.execute("BEGIN")
        await cur.execute(f"SELECT * FROM {table} FOR UPDATE")  # next-key locks: all of it
        await asyncio.sleep(point + 3 - time.time())
        await cur.execute("ROLLBACK")
    return from_seconds(point)


async def _load(up: MariaDBServer, stop: asyncio.Event, ops: list[list[Op]]) -> None:
    """Transactions until ``stop``: sequence number k into ops, and one to three tables
    written; ``ops[k - 1]`` says what transaction k did to them."""
    rng = random.Random(7)
    async with up.connect("shop") as conn, conn.cursor() as cur:
        while not stop.is_set():
            k = len(ops) + 1
            done: list[Op] = []
            await cur.execute("BEGIN")
            await cur.execute("INSERT INTO ops VALUES (%s)", (k,))
            for table in rng.sample(TABLES, rng.randint(1, 3)):
                key = rng.randint(1, 20)
                if rng.random() < 0.2:
                    await cur.execute(f"DELETE FROM {table} WHERE id = %s", (key,))
                    done.append((table, "delete", key))
                else:
                    await cur.execute(
                        f"INSERT INTO {table} VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = %s",
                        (key, k, k),
                    )
                    done.append((table, "put", key))
            await cur.execute("COMMIT")
            ops.append(done)
            await asyncio.sleep(0.005)


def _replay(ops: Sequence[list[Op]]) -> State:
    """The tables after the transactions ``ops`` (transaction k puts v = k)."""
    state: State = {t: {} for t in TABLES}
    for k, done in enumerate(ops, start=1):
        for table, what, key in done:
            if what == "put":
                state[table][key] = k
            else:
                state[table].pop(key, None)
    return state


async def _commit_ts(up: MariaDBServer, start: str, start_ts: int, count: int) -> list[int]:
    """The commit ts of sequence numbers 1..count, read from the upstream binlog from the
    changefeed's start as its processors read it (same filter, same first ts)."""
    cfg = SourceConfig.from_uri(up.dsn() + "?server-id=4343", filter=table_filter(("*.*",)))
    found: dict[int, int] = {}
    async with asyncio.timeout(60), open_source(cfg, Position.parse(start), start_ts) as txns:
        async for item in txns:
            for row in item.txn.rows:
                if row.table.table == "ops":
                    found[int(row.values["k"])] = item.txn.commit_ts  # type: ignore[arg-type]
            if len(found) == count:
                break
    return [found[k] for k in range(1, count + 1)]
