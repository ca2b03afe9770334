"""Composition root of the demo: the whole pipeline up, loaded, checked and down.

Order: wipe the data dir -> drop the demo's databases on a MySQL side -> etcd -> pumps (each
embeds a TSO member) -> etcd client and TSO client -> a TSO timestamp -> the drainer, started
after that timestamp -> pump client and upstream -> bank and mixed workloads for ``duration``
seconds, a progress line per second -> wait until the drainer's checkpoint reaches the
workload's last commit ts (timed from the end of the load) -> ``binlogctl pumps`` and
``binlogctl drainers`` -> the consistency checker and the bank totals -> RESULT ->
(``--keep``: wait for Ctrl-C) -> stop the drainer, the pumps, then etcd.

Invariant: the cluster is stopped on every way out: success, a failed check, an error, or the
``stop`` event (first Ctrl-C/SIGTERM), which cancels whatever step is running, except the load:
its writers finish the transaction they are in, so no prewrite is left without its commit or
rollback binlog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from services.demo.cluster import DemoCluster, DrainerNode, PumpNode, prepare_data_dir
from services.demo.ctl import run_binlogctl
from services.demo.databases import bank_total, bank_total_at, clear_mysql
from services.demo.drainer_watch import CatchUp, DrainerWatch
from services.demo.endpoints import DATABASES, Endpoints
from services.demo.errors import DemoError
from services.demo.load import DemoLoad, LoadResult
from services.demo.procs import Supervisor
from services.demo.progress import Counts, lag_seconds, rate
from services.demo.ui import Console
from services.demo.verdict import Verdict
from tributary.checker import CheckerError, Report, compare
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.election import current_leader
from tributary.coord.etcd import EtcdKv
from tributary.ddlhistory import KvDdlHistory
from tributary.pumpclient import PumpsClient
from tributary.tso.client import TsoClient
from tributary.tso.keys import LEADER_PREFIX
from tributary.workload import Upstream, WorkloadError, open_upstream

log = logging.getLogger(__name__)

T = TypeVar("T")

PUMPS = 2
CHECKPOINT_INTERVAL = "0.5"  # seconds between the drainer's checkpoint saves
CATCH_UP_TIMEOUT = 60.0  # seconds the drainer gets to pass the last commit after the load
COMMIT_TIMEOUT = 30.0  # seconds the pump client retries a C-binlog (TiDB: 600)
TABLES = [f"{db}.*" for db in DATABASES]  # what the checker compares


@dataclass(frozen=True)
class Options:
    endpoints: Endpoints
    duration: float = 30.0  # seconds of load
    writers: int = 8  # concurrent writers, split between bank and mixed
    data_dir: Path = Path("demo-data")  # absolute once parsed
    keep: bool = False  # keep everything running after the result, until Ctrl-C


@dataclass(frozen=True)
class Outcome:
    passed: bool
    drainer: DrainerNode


async def run(opts: Options, cluster: DemoCluster, ui: Console, stop: asyncio.Event) -> int:
    """The whole demo in ``cluster`` (entered, its data dir prepared); the exit code
    (0 pass, 1 fail, 130 interrupted)."""
    try:
        outcome = await _until(stop, _demo(opts, cluster, ui, stop))
        if outcome is None:
            ui.interrupted()
            return 130
        if opts.keep and cluster.etcd is not None:
            ui.keep(cluster.etcd, cluster.pumps, outcome.drainer, opts.endpoints)
            await stop.wait()
        return 0 if outcome.passed else 1
    finally:
        if cluster.etcd is None:  # nothing was started
            await cluster.stop()
        else:
            ui.stopping()
            ui.stopped(await cluster.stop())


async def main(opts: Options, supervisor: Supervisor, ui: Console, stop: asyncio.Event) -> int:
    ui.banner(opts.duration, opts.writers, opts.data_dir, opts.endpoints)
    ui.leftovers(prepare_data_dir(opts.data_dir))
    async with DemoCluster(opts.data_dir, supervisor) as cluster:
        return await run(opts, cluster, ui, stop)


async def _until(stop: asyncio.Event, coro: Coroutine[Any, Any, T]) -> T | None:
    """Run ``coro``; cancel it and return None if ``stop`` is set first."""
    work = asyncio.create_task(coro, name="demo-main")
    stopped = asyncio.create_task(stop.wait(), name="demo-stop-wait")
    try:
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not work.done():
            work.cancel()
        await asyncio.gather(work, stopped, return_exceptions=True)
    if work.cancelled():
        return None
    return work.result()


@dataclass(frozen=True)
class Started:
    etcd_url: str
    pumps: list[PumpNode]
    cluster_id: int


async def _demo(opts: Options, cluster: DemoCluster, ui: Console, stop: asyncio.Event) -> Outcome:
    ends = opts.endpoints
    for side, url in (("upstream", ends.upstream), ("downstream", ends.downstream)):
        ui.cleared(ends, side, await clear_mysql(url))
    started = await _start(cluster, ui)
    async with AsyncExitStack() as stack:
        kv = await stack.enter_async_context(EtcdKv.connect([started.etcd_url]))
        tso = await stack.enter_async_context(TsoClient(kv, started.cluster_id))

        ui.step(3, "Starting a drainer: it pulls both pumps, merges by commit ts, applies")
        initial = await tso.get_ts()
        drainer = await cluster.start_drainer(
            ends.sink_url,
            extra=[
                "--checkpoint-interval",
                CHECKPOINT_INTERVAL,
                "--initial-commit-ts",
                str(initial),
            ],
        )
        ui.drainer(drainer, ends, initial)
        http = await stack.enter_async_context(
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))
        )
        watch = DrainerWatch(http, drainer.status_url)
        try:
            upstream = await stack.enter_async_context(
                open_upstream(ends.upstream, writers=opts.writers)
            )
        except WorkloadError as e:
            raise DemoError(f"cannot open the upstream {ends.shown('upstream')}: {e}") from e

        ui.step(4, "Running the bank and mixed workloads (TiDB's part: SQL upstream + binlogs)")
        load = asyncio.create_task(
            _load(opts, kv, started.cluster_id, tso, upstream, watch, initial, ui, stop),
            name="demo-load",
        )
        try:
            result, written = await asyncio.shield(load)
        except asyncio.CancelledError:
            # Interrupted (``stop`` is set): the writers finish their transaction first.
            await load
            raise

        target = result.max_commit_ts
        ui.step(5, f"Waiting for the drainer's checkpoint to reach the last commit ts {target}")
        caught = await _catch_up(watch, drainer, target, ui)

        ui.step(6, "The cluster as an operator sees it (binlogctl, a separate process)")
        for nodes in ("pumps", "drainers"):
            ui.command_output(*await run_binlogctl(nodes, "--pd-urls", started.etcd_url))

        ui.step(7, "Consistency: the checker compares every table, then the bank's total")
        verdict = await _check(ends, upstream, result, caught.reached, ui)
        ui.result(verdict, written, opts.data_dir)
        return Outcome(verdict.ok, drainer)


async def _start(cluster: DemoCluster, ui: Console) -> Started:
    ui.step(1, "Starting a private etcd (the coordination store, PD's role)")
    etcd = await cluster.start_etcd()
    ui.etcd(etcd)

    ui.step(2, f"Starting {PUMPS} pumps; each embeds a TSO member and one wins the election")
    pumps = await cluster.start_pumps(PUMPS)
    for pump in pumps:
        ui.pump(pump)
    async with EtcdKv.connect([etcd.url]) as kv:
        cluster_id = await read_cluster_id(kv)
        if cluster_id is None:
            raise DemoError("the pumps are ready but no cluster ID is stored in etcd")
        leader = await current_leader(kv, LEADER_PREFIX)
    leader_addr = "" if leader is None else leader.value.decode()
    leader_name = next((p.name for p in pumps if p.addr == leader_addr), leader_addr or "?")
    ui.detail(f"cluster ID {cluster_id}; TSO leader: {leader_name} ({leader_addr})")
    return Started(etcd.url, pumps, cluster_id)


async def _load(
    opts: Options,
    kv: EtcdKv,
    cluster_id: int,
    tso: TsoClient,
    upstream: Upstream,
    watch: DrainerWatch,
    initial: int,
    ui: Console,
    stop: asyncio.Event,
) -> tuple[LoadResult, Counts]:
    """Set up and run both workloads with a progress line per second; the result and what was
    written in all (set-up included)."""
    async with PumpsClient(kv, cluster_id, commit_timeout=COMMIT_TIMEOUT) as client:
        load = DemoLoad(upstream, client, tso, KvDdlHistory(kv))
        try:
            setup = await load.setup()
        except WorkloadError as e:
            raise DemoError(f"setting the workloads up failed: {e}") from e
        ui.setup_done(setup, load.tables, load.bank.accounts)
        async with asyncio.TaskGroup() as tg:
            ticker = tg.create_task(_report(load, watch, initial, ui), name="demo-progress")
            result = await load.run(opts.writers, opts.duration, stop)
            ticker.cancel()
        written = load.counts()
        ui.load_done(result, written - setup)
        return result, written


async def _report(load: DemoLoad, watch: DrainerWatch, initial: int, ui: Console) -> None:
    """One progress line per second while the load runs."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    second, last, last_at = 0, load.counts().commits, began
    while True:
        second += 1
        await asyncio.sleep(max(0.0, began + second - loop.time()))
        now = loop.time()
        written = load.counts()
        sample = await watch.sample()
        lag = lag_seconds(sample.checkpoint_ts, time.time(), initial)
        ui.progress(
            second, rate(written.commits - last, now - last_at), written, sample.applied, lag
        )
        last, last_at = written.commits, now


async def _catch_up(watch: DrainerWatch, drainer: DrainerNode, target: int, ui: Console) -> CatchUp:
    try:
        caught = await watch.wait_past(target, CATCH_UP_TIMEOUT, drainer.child.check_alive)
    except DemoError as e:  # the drainer's process ended
        ui.drainer_gone(str(e))
        return CatchUp(False, 0.0, None)
    ui.caught_up(caught.reached, caught.waited, caught.checkpoint_ts, target)
    return caught


async def _check(
    ends: Endpoints, upstream: Upstream, result: LoadResult, caught_up: bool, ui: Console
) -> Verdict:
    report: Report | None = None
    error = ""
    up_total = down_total = None
    if not caught_up:
        ui.not_compared("the downstream is not complete, so rows would differ by lag alone")
    else:
        try:
            report = await compare(ends.upstream, ends.downstream, tables=TABLES)
            ui.report(report)
            up_total = await bank_total(upstream)
            down_total = await bank_total_at(ends.downstream)
        except (CheckerError, DemoError) as e:
            error = f"the check could not run: {e}"
            ui.check_error(error)
    verdict = Verdict(
        load_error=result.error,
        caught_up=caught_up,
        report=report,
        check_error=error,
        expected_total=result.expected_total,
        upstream_total=up_total,
        downstream_total=down_total,
    )
    if report is not None and not error:
        ui.totals(verdict)
    return verdict
