"""Small parts of the workload: the per-table read/write lock, the pacer, the CLI flags, how
upstream errors are classified."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncmy.errors
import pytest

from tributary.sql import Statement
from tributary.workload.cli import parse_args
from tributary.workload.errors import Conflict, ConnectionLost, UpstreamError
from tributary.workload.runner import Pacer, _Budget
from tributary.workload.rwlock import RwLock
from tributary.workload.upstream_mysql import map_error as mysql_error
from tributary.workload.upstream_sqlite import SqliteUpstream


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_readers_share_and_a_writer_waits_for_them() -> None:
    lock, order = RwLock(), []

    async def hold(name: str, write: bool, release: asyncio.Event) -> None:
        async with lock.write() if write else lock.read():
            order.append(f"+{name}")
            await release.wait()
        order.append(f"-{name}")

    r1, w, r2 = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(hold("r1", False, r1), name="r1")
        await settle()
        tg.create_task(hold("w", True, w), name="w")
        await settle()
        tg.create_task(hold("r2", False, r2), name="r2")  # arrives after the waiting writer
        await settle()
        assert order == ["+r1"] and lock.readers == 1 and not lock.writing
        r1.set()
        await settle()
        assert order == ["+r1", "-r1", "+w"] and lock.writing
        w.set()
        await settle()
        assert order[-2:] == ["-w", "+r2"]
        r2.set()
    assert lock.readers == 0 and not lock.writing


async def test_a_cancelled_waiter_leaves_the_lock_usable() -> None:
    lock = RwLock()
    release = asyncio.Event()

    async def reader() -> None:
        async with lock.read():
            await release.wait()

    async def writer() -> None:
        async with lock.write():
            pass

    holder = asyncio.create_task(reader(), name="holder")
    await settle()
    waiting = asyncio.create_task(writer(), name="waiting-writer")
    await settle()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    async with lock.read():  # not blocked behind the cancelled writer
        assert lock.readers == 2
    release.set()
    await holder
    async with lock.write():
        assert lock.writing


def test_pacer_spaces_slots_and_bounds_the_catch_up() -> None:
    now = [100.0]
    pacer = Pacer(1000, lambda: now[0], max_lag=1.0)
    assert [round(pacer.delay(), 6) for _ in range(3)] == [0.0, 0.001, 0.002]
    now[0] = 105.0  # everybody stalled for 5 s: no 5 s of slots in a burst
    delays = [pacer.delay() for _ in range(1001)]
    assert delays[:1000] == [0.0] * 1000 and delays[1000] == pytest.approx(0.0, abs=1e-6)
    assert pacer.delay() == pytest.approx(0.001, abs=1e-6)
    with pytest.raises(ValueError):
        Pacer(0, lambda: 0.0)


def test_budget() -> None:
    budget = _Budget(2)
    assert [budget.take() for _ in range(3)] == [True, True, False]
    assert all(_Budget(None).take() for _ in range(10))


def test_cli_flags() -> None:
    opts = parse_args(["--upstream", "sqlite:///tmp/x.db", "--pd-urls", "http://a:1, http://b:2"])
    assert opts.kind == "bank" and opts.pd_urls == ("http://a:1", "http://b:2")
    assert (opts.duration, opts.txns, opts.writers, opts.rate) == (30.0, None, 8, None)
    opts = parse_args(
        ["--kind", "mixed", "--upstream", "mysql://u:p@h:1", "--txns", "50", "--rate", "2000",
         "--seed", "3", "--writers", "2", "--ddl-ratio", "0.1"]
    )  # fmt: skip
    assert (opts.kind, opts.duration, opts.txns, opts.rate, opts.seed) == (
        "mixed",
        None,
        50,
        2000,
        3,
    )
    assert opts.ddl_ratio == 0.1
    with pytest.raises(SystemExit):
        parse_args(["--upstream", "x", "--kind", "other"])
    with pytest.raises(SystemExit):
        parse_args(["--upstream", "x", "--writers", "0"])


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (asyncmy.errors.OperationalError(1213, "Deadlock found"), Conflict),
        (asyncmy.errors.OperationalError(1205, "Lock wait timeout exceeded"), Conflict),
        (asyncmy.errors.IntegrityError(1062, "Duplicate entry"), Conflict),
        (asyncmy.errors.OperationalError(2013, "Lost connection"), ConnectionLost),
        (asyncmy.errors.OperationalError(1927, "Connection was killed"), ConnectionLost),
        (asyncmy.errors.InterfaceError(0, ""), ConnectionLost),
        (ConnectionResetError(104, "reset"), ConnectionLost),
        (asyncmy.errors.ProgrammingError(1064, "syntax error"), UpstreamError),
        (asyncmy.errors.IntegrityError(1048, "Column cannot be null"), UpstreamError),
    ],
)
def test_mysql_errors_are_classified_by_number(error: BaseException, kind: type) -> None:
    mapped = mysql_error(error, "statement")
    assert type(mapped) is kind
    assert mapped.retriable == (kind is not UpstreamError)


async def test_sqlite_errors_are_classified_by_result_code(tmp_path: Path) -> None:
    up = await SqliteUpstream.open(tmp_path / "x.db")
    try:
        async with up.session() as s:
            await s.execute(Statement("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
            await s.execute(Statement("INSERT INTO t VALUES (1, 'a')"))
            with pytest.raises(Conflict):
                await s.execute(Statement("INSERT INTO t VALUES (1, 'b')"))
            with pytest.raises(UpstreamError) as raised:
                await s.execute(Statement("INSERT INTO t VALUES (2, NULL)"))
            assert not raised.value.retriable
    finally:
        await up.close()
