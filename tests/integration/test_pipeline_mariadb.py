"""End to end: a MariaDB upstream written by the workload (binlogs through real pumps), a real
drainer process, a MariaDB downstream; the consistency checker has the last word.

Consistent mode is checked while it runs too: once the downstream holds every bank account, every
sample of its total balance equals the upstream's invariant total (no half-applied transfer is
ever visible), through a drainer SIGKILL, a downstream restart and pump faults.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import pytest

from tests.support.pipeline import Pipeline, caught_up, running_pipeline
from tributary.checker import compare
from tributary.workload import open_upstream, run_workload
from tributary.workload.bank import Bank

if TYPE_CHECKING:
    from tests.support.mariadb import MariaDBPair, MariaDBServer

pytest_plugins = ["tests.support.mariadb"]
pytestmark = [pytest.mark.etcd, pytest.mark.timeout(300)]

ACCOUNTS = 200


def sink_url(server: MariaDBServer) -> str:
    return f"{server.dsn()}?consistent=true"


async def settle(pipe: Pipeline, pair: MariaDBPair, upto: int) -> None:
    d = pair.downstream
    await caught_up(d.host, d.port, d.user, d.password, upto)
    report = await compare(pair.upstream.dsn(), d.dsn())
    assert report.equal, report.render_text()


class BankWatch:
    """Samples the downstream bank total while the pipeline runs."""

    def __init__(self, server: MariaDBServer) -> None:
        self.server = server
        self.samples: list[int] = []
        self.expected: int | None = None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            try:
                rows = await self.server.query(
                    "SELECT COUNT(*), COALESCE(SUM(balance), 0) FROM bank.accounts"
                )
            except Exception:
                continue
            count, total = rows[0]
            if count == ACCOUNTS:
                self.samples.append(int(total))

    def check(self, expected: int) -> None:
        assert len(self.samples) >= 10, f"only {len(self.samples)} samples with every account"
        wrong = [s for s in self.samples if s != expected]
        assert not wrong, f"half-applied transfers visible downstream: {wrong[:5]} != {expected}"


@contextlib.asynccontextmanager
async def watching(server: MariaDBServer) -> AsyncIterator[BankWatch]:
    watch = BankWatch(server)
    task = asyncio.create_task(watch.run(), name="test-bank-watch")
    try:
        yield watch
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def upstream_total(server: MariaDBServer) -> int:
    rows = await server.query("SELECT SUM(balance) FROM bank.accounts")
    return int(rows[0][0])


async def test_bank_and_mixed_with_ddl_replicate_exactly(
    mariadb_pair: MariaDBPair, tmp_path: Path
) -> None:
    pair = mariadb_pair
    async with (
        running_pipeline(tmp_path, pumps=3) as pipe,
        open_upstream(pair.upstream.dsn(), writers=12) as upstream,
        watching(pair.downstream) as watch,
    ):
        await pipe.cluster.start_drainer(sink_url(pair.downstream))

        async def run(kind: str, seed: int) -> int:
            stats = await run_workload(
                Bank("bank", accounts=ACCOUNTS) if kind == "bank" else kind,
                upstream,
                pipe.pumps,
                pipe.tso,
                pipe.history,
                writers=6,
                txns=150,
                seed=seed,
            )
            assert stats.commits > 50, stats.as_dict()
            return stats.max_commit_ts

        bank_ts, mixed_ts = await asyncio.gather(run("bank", 1), run("mixed", 2))
        await settle(pipe, pair, max(bank_ts, mixed_ts))
        watch.check(await upstream_total(pair.upstream))


async def test_faults_drainer_sigkill_downstream_restart_pump_kill_join_and_offline(
    mariadb_pair: MariaDBPair, tmp_path: Path
) -> None:
    pair = mariadb_pair
    async with (
        running_pipeline(tmp_path, pumps=2) as pipe,
        open_upstream(pair.upstream.dsn(), writers=8) as upstream,
        watching(pair.downstream) as watch,
    ):
        cluster = pipe.cluster
        drainer = await cluster.start_drainer(sink_url(pair.downstream))
        stop = asyncio.Event()
        load = asyncio.create_task(
            run_workload(
                Bank("bank", accounts=ACCOUNTS),
                upstream,
                pipe.pumps,
                pipe.tso,
                pipe.history,
                writers=6,
                rate=150,
                seed=3,
                stop=stop,
            ),
            name="test-bank-load",
        )
        try:
            await asyncio.sleep(4)
            # 1. the drainer dies mid-stream and comes back: it resumes from the downstream's
            #    checkpoint, nothing lost, nothing applied twice
            drainer.child.kill()
            await asyncio.sleep(1)
            drainer = await cluster.start_drainer(sink_url(pair.downstream))
            await asyncio.sleep(3)
            # 2. the downstream restarts under it: the sink retries until it is back
            pair.downstream.stop()
            await asyncio.sleep(2)
            pair.downstream.start()
            await asyncio.sleep(3)
            # 3. a pump joins during replication
            (joined,) = await cluster.start_pumps(1)
            await asyncio.sleep(3)
            # 4. a pump is killed and restarted
            victim = cluster.pumps[0]
            victim.child.kill()
            await asyncio.sleep(2)
            await cluster.restart_pump(victim)
            await asyncio.sleep(3)
            # 5. a pump is taken offline (what binlogctl offline-pump does)
            async with (
                aiohttp.ClientSession() as http,
                http.put(f"{joined.status_url}/state/{joined.name}/close") as resp,
            ):
                assert resp.status == 200, await resp.text()
            await asyncio.sleep(4)
        finally:
            stop.set()
            stats = await load
        assert stats.commits > 0, stats.as_dict()  # the load ran through every fault
        await settle(pipe, pair, stats.max_commit_ts)
        watch.check(await upstream_total(pair.upstream))
        assert drainer.child.running
