"""Running a workload: setup, then ``writers`` concurrent writer tasks until a deadline, a
transaction count or a stop event, optionally paced to a target rate.

Pacing hands out start slots ``1/rate`` apart to whichever writer asks next (an open-loop
schedule shared by all writers); a writer that fell behind does not make up more than
``MAX_LAG`` seconds of slots at once. Example, rate 1000/s, three writers asking at t=0: they
start at 0, 1 ms and 2 ms; if every writer is stuck until t=5 s, the next slots are
4.0 s, 4.001 s, ... (not 3 ms, 4 ms, ...), so a stall is followed by at most one second's burst.

Invariant: writers are stopped between steps, never inside one, so every transaction ends
with its commit or rollback binlog; a writer's fatal error stops the others the same way and
is raised once they have all finished.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from tributary.ddlhistory import KvDdlHistory
from tributary.tso.client import Tso
from tributary.workload.bank import Bank
from tributary.workload.catalog import Catalog
from tributary.workload.ddl import DdlRunner
from tributary.workload.env import Env, Workload
from tributary.workload.mixed import Mixed, MixedOptions
from tributary.workload.stats import WorkloadStats
from tributary.workload.txn import BinlogWriter, Executor
from tributary.workload.upstream import Upstream

log = logging.getLogger(__name__)

MAX_LAG = 1.0  # seconds of missed slots a paced run catches up at once
KINDS = ("bank", "mixed")


class Pacer:
    """Start slots ``1/rate`` apart (see the module docstring); ``clock`` in seconds."""

    def __init__(self, rate: float, clock: Callable[[], float], max_lag: float = MAX_LAG) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self._interval = 1.0 / rate
        self._clock = clock
        self._max_lag = max_lag
        self._next = clock()

    def delay(self) -> float:
        """Claim the next slot; how long to wait for it."""
        now = self._clock()
        slot = max(self._next, now - self._max_lag)
        self._next = slot + self._interval
        return max(0.0, slot - now)


@dataclass
class _Budget:
    left: int | None  # steps still to run; None: no limit

    def take(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def make_workload(
    kind: str,
    database: str | None = None,
    *,
    accounts: int = 1000,
    mixed: MixedOptions | None = None,
) -> Workload:
    if kind == "bank":
        return Bank(database or "bank", accounts=accounts)
    if kind == "mixed":
        return Mixed(database or "mixed", mixed)
    raise ValueError(f"unknown workload kind {kind!r}; one of {', '.join(KINDS)}")


async def build_env(
    upstream: Upstream,
    pumps_client: BinlogWriter,
    tso: Tso,
    history: KvDdlHistory,
    *,
    record_latency: bool = False,
    wall_clock: Callable[[], float] = time.time,
) -> Env:
    """The catalog (loaded from the DDL history), executor and DDL runner of one run;
    ``wall_clock`` stamps the latency records."""
    stats = WorkloadStats()
    catalog = await Catalog.load(history)
    txns = Executor(
        upstream,
        pumps_client,
        tso,
        catalog,
        stats,
        record_latency=record_latency,
        wall_clock=wall_clock,
    )
    ddl = DdlRunner(upstream, pumps_client, tso, history, catalog, stats)
    return Env(upstream, catalog, txns, ddl, stats)


async def run_workload(
    kind: str | Workload,
    upstream: Upstream,
    pumps_client: BinlogWriter,
    tso: Tso,
    history: KvDdlHistory,
    *,
    writers: int = 8,
    duration: float | None = None,
    txns: int | None = None,
    rate: float | None = None,
    seed: int | None = None,
    database: str | None = None,
    record_latency: bool = False,
    stop: asyncio.Event | None = None,
) -> WorkloadStats:
    """Set the workload up, then run it; the run's counters (and latency records if asked).

    ``duration`` (s) and ``txns`` (steps: transactions and DDLs) bound the run; with neither
    it runs until ``stop`` is set. ``rate`` (steps/s, all writers together) paces it.
    """
    if duration is None and txns is None and stop is None:
        raise ValueError("give a duration, a transaction count or a stop event")
    workload = make_workload(kind, database) if isinstance(kind, str) else kind
    env = await build_env(upstream, pumps_client, tso, history, record_latency=record_latency)
    await workload.setup(env)
    await run_writers(
        env,
        workload,
        writers=writers,
        duration=duration,
        txns=txns,
        rate=rate,
        seed=seed,
        stop=stop,
    )
    return env.stats


async def run_writers(
    env: Env,
    workload: Workload,
    *,
    writers: int = 8,
    duration: float | None = None,
    txns: int | None = None,
    rate: float | None = None,
    seed: int | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run ``workload.step`` in ``writers`` tasks (the workload is set up already)."""
    if writers < 1:
        raise ValueError("need at least one writer")
    seed = random.randrange(1 << 32) if seed is None else seed
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration if duration is not None else float("inf")
    pacer = Pacer(rate, loop.time) if rate else None
    budget = _Budget(txns)
    stop = stop or asyncio.Event()
    errors: list[BaseException] = []

    async def writer(index: int) -> None:
        rng = random.Random(f"{seed}/{index}")
        try:
            while not stop.is_set() and loop.time() < deadline and budget.take():
                if pacer is not None and (wait := pacer.delay()) > 0:
                    await asyncio.sleep(wait)
                await workload.step(env, rng)
        except Exception as e:
            errors.append(e)
            stop.set()
            log.error("writer %d failed: %r", index, e)

    began = time.monotonic()
    async with asyncio.TaskGroup() as tg:
        for i in range(writers):
            tg.create_task(writer(i), name=f"workload-writer-{i}")
    log.info("workload done in %.1f s: %s", time.monotonic() - began, env.stats.as_dict())
    if errors:
        raise errors[0]
