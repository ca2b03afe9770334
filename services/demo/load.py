"""The demo's load: the ``bank`` and ``mixed`` workloads at once against one upstream.

Each workload gets its own environment (catalog, executor, DDL runner, counters) on the shared
upstream, pump client, TSO client and DDL history, as two TiDB sessions would share a cluster.
``bank`` (database ``demo_bank``) moves money between accounts, so its total never changes;
``mixed`` (``demo_mixed``) writes many tables and column types and runs DDL mid-stream.
Writers are split between them, bank first: 8 writers are 4 + 4, 5 are 3 + 2.

Invariant: the writers stop only between transactions (when the run ends, ``stop`` is set or
a writer of either workload fails), so every prewrite binlog is followed by its commit or
rollback binlog; a failure in one workload stops the other the same way, never by
cancelling it mid-transaction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from services.demo.endpoints import BANK_DB, MIXED_DB
from services.demo.progress import Counts
from tributary.ddlhistory import KvDdlHistory
from tributary.tso.client import Tso
from tributary.workload import Bank, BinlogWriter, Env, Mixed, Upstream, WorkloadStats, build_env
from tributary.workload.runner import run_writers

log = logging.getLogger(__name__)

ACCOUNTS = 1000


def split(writers: int) -> tuple[int, int]:
    """Writers for (bank, mixed); each gets at least one."""
    bank = max(1, (writers + 1) // 2)
    return bank, max(1, writers - bank)


@dataclass(frozen=True)
class LoadResult:
    elapsed: float  # seconds the writers ran
    bank: WorkloadStats
    mixed: WorkloadStats
    error: str  # why a writer stopped the load ("" if none did)
    expected_total: int  # the bank's total, opening balances summed

    @property
    def max_commit_ts(self) -> int:
        return max(self.bank.max_commit_ts, self.mixed.max_commit_ts)


class DemoLoad:
    def __init__(
        self,
        upstream: Upstream,
        binlogs: BinlogWriter,
        tso: Tso,
        history: KvDdlHistory,
        *,
        accounts: int = ACCOUNTS,
        seed: int | None = None,
    ) -> None:
        self.bank = Bank(BANK_DB, accounts=accounts)
        self.mixed = Mixed(MIXED_DB)
        self._parts = (upstream, binlogs, tso, history)
        self._seed = seed
        self._envs: tuple[Env, Env] | None = None

    @property
    def expected_total(self) -> int:
        return self.bank.expected_total

    async def setup(self) -> Counts:
        """Create both workloads' databases, tables and first rows; what that wrote."""
        upstream, binlogs, tso, history = self._parts
        bank_env = await build_env(upstream, binlogs, tso, history)
        mixed_env = await build_env(upstream, binlogs, tso, history)
        await self.bank.setup(bank_env)
        await self.mixed.setup(mixed_env)
        self._envs = (bank_env, mixed_env)
        return self.counts()

    def counts(self) -> Counts:
        if self._envs is None:
            return Counts()
        stats = [env.stats for env in self._envs]
        return Counts(
            sum(s.commits for s in stats), sum(s.ddls for s in stats), sum(s.rows for s in stats)
        )

    @property
    def tables(self) -> int:
        """Tables the workloads have now (mixed creates and drops some)."""
        if self._envs is None:
            return 0
        bank_env, mixed_env = self._envs
        return len(bank_env.catalog.tables(BANK_DB)) + len(mixed_env.catalog.tables(MIXED_DB))

    async def run(self, writers: int, duration: float, stop: asyncio.Event) -> LoadResult:
        """Run both workloads for ``duration`` seconds or until ``stop`` is set."""
        if self._envs is None:
            raise RuntimeError("setup() first")
        bank_env, mixed_env = self._envs
        bank_writers, mixed_writers = split(writers)
        halt = asyncio.Event()  # set by a failing writer too: stops both workloads
        seed = self._seed
        began = time.monotonic()
        relay = asyncio.create_task(_relay(stop, halt), name="demo-load-stop-relay")
        try:
            results = await asyncio.gather(
                run_writers(
                    bank_env, self.bank, writers=bank_writers, duration=duration, stop=halt,
                    seed=seed,
                ),
                run_writers(
                    mixed_env, self.mixed, writers=mixed_writers, duration=duration, stop=halt,
                    seed=None if seed is None else seed + 1,
                ),
                return_exceptions=True,
            )  # fmt: skip
        finally:
            relay.cancel()
            await asyncio.gather(relay, return_exceptions=True)
        errors = [
            f"{name}: {r!r}"
            for name, r in zip(("bank", "mixed"), results, strict=True)
            if r is not None
        ]
        for e in errors:
            log.error("workload failed: %s", e)
        return LoadResult(
            time.monotonic() - began,
            bank_env.stats,
            mixed_env.stats,
            "; ".join(errors),
            self.bank.expected_total,
        )


async def _relay(stop: asyncio.Event, halt: asyncio.Event) -> None:
    await stop.wait()
    halt.set()
