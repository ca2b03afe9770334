"""``run_workload``: step budgets, a restart on an existing schema, a writer's failure.
Real SQLite upstream; TSO, binlog writer and etcd are in-memory fakes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.support.workload_fakes import Events, LoggingTso, LoggingWriter
from tributary.coord.memory import MemoryKv
from tributary.ddlhistory import KvDdlHistory
from tributary.workload import Bank, Catalog, Mixed, MixedOptions, run_workload, total_balance
from tributary.workload.env import Env
from tributary.workload.mixed_tables import BASE
from tributary.workload.upstream_sqlite import SqliteUpstream


class Counting:
    """A workload that counts its steps; step ``fail_at`` raises."""

    def __init__(self, fail_at: int = -1) -> None:
        self.steps = 0
        self.fail_at = fail_at

    async def setup(self, env: Env) -> None:
        pass

    async def step(self, env: Env, rng: random.Random) -> None:
        self.steps += 1
        if self.steps == self.fail_at:
            raise RuntimeError("boom")


async def test_a_step_budget_is_exact_across_writers(tmp_path: Path) -> None:
    events: Events = []
    up = await SqliteUpstream.open(tmp_path / "up.db")
    try:
        work = Counting()
        history = KvDdlHistory(MemoryKv())
        args = (up, LoggingWriter(events), LoggingTso(events), history)
        await run_workload(work, *args, writers=5, txns=37)
        assert work.steps == 37
        failing = Counting(fail_at=10)
        with pytest.raises(RuntimeError, match="boom"):
            await run_workload(failing, *args, writers=3, duration=30)
        assert failing.steps < 100  # the others stopped soon after
    finally:
        await up.close()


async def test_a_restarted_workload_continues_on_its_tables(tmp_path: Path) -> None:
    events: Events = []
    up = await SqliteUpstream.open(tmp_path / "up.db")
    history = KvDdlHistory(MemoryKv())
    writer, tso = LoggingWriter(events), LoggingTso(events)
    try:
        first = await run_workload(Bank("bank", accounts=12), up, writer, tso, history, txns=30)
        assert first.ddls == 2 and first.commits > 20
        again = Bank("bank", accounts=12)
        second = await run_workload(again, up, writer, tso, history, writers=3, txns=30)
        assert second.ddls == 0 and second.commits > 20  # no new database, table or accounts
        assert await total_balance(up, "bank") == again.expected_total == 12_000
        mixed = Mixed("mixed", MixedOptions(ddl_ratio=0.2, initial_rows=10))
        stats = await run_workload(mixed, up, writer, tso, history, writers=2, txns=40, seed=9)
        assert stats.ddls > 5 and stats.failures == 0
        catalog = await Catalog.load(history)
        missing = [t.name for t in BASE if catalog.table("mixed", t.name) is None]  # renamed
        restarted = await run_workload(
            Mixed("mixed", MixedOptions(ddl_ratio=0)), up, writer, tso, history, txns=20
        )
        assert restarted.ddls == len(missing) and restarted.commits > 10
        prewrites = [e[1] for e in events if e[0] == "prewrite"]
        closed = {e[1] for e in events if e[0] in ("commit", "rollback")}
        assert len(prewrites) == len(set(prewrites)) and set(prewrites) == closed
    finally:
        await up.close()
