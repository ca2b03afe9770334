"""Composition root of the demo: cluster up, load, binlogctl, verification, cluster down.

Order: wipe the data dir -> etcd -> pumps (each embeds a TSO member) -> etcd
client, TSO client and pump client -> load for ``duration`` seconds -> close
the clients -> ``binlogctl pumps`` -> pull and check -> (``--keep``: wait for
Ctrl-C) -> stop pumps, then etcd.

Invariant: the cluster is stopped on every way out: success, a failed check,
an error, or the ``stop`` event (first Ctrl-C/SIGTERM), which cancels
whatever step is running, except the load: its writers finish the
transaction they are in, so the pump client closes with no RPC in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from coord.cluster_id import read_cluster_id
from coord.election import current_leader
from coord.etcd import EtcdKv
from pumpclient import ClientStats, PumpsClient
from services.demo.cluster import DemoCluster, PumpNode, prepare_data_dir
from services.demo.ctl import ctl_argv, run_binlogctl
from services.demo.errors import DemoError
from services.demo.loadgen import LoadGenerator
from services.demo.procs import Supervisor
from services.demo.ui import Console
from services.demo.verify import check, pull_all
from tso.client import TsoClient
from tso.keys import LEADER_PREFIX

log = logging.getLogger(__name__)

T = TypeVar("T")

PUMPS = 2
PULL_TIMEOUT = 60.0  # seconds the verification may pull before it reports what is missing
COMMIT_TIMEOUT = 30.0  # seconds the pump client retries a C-binlog (TiDB: 600)


@dataclass(frozen=True)
class Options:
    duration: float = 20.0  # seconds of load
    writers: int = 32  # concurrent writer tasks
    data_dir: Path = Path("demo-data")  # absolute once parsed
    keep: bool = False  # keep the cluster running after the check, until Ctrl-C
    rollback_ratio: float = 0.05


@dataclass(frozen=True)
class Outcome:
    passed: bool  # the verification passed
    sample_start_ts: int  # a transaction stored on pump-1 (0 if none)


async def run(opts: Options, supervisor: Supervisor, ui: Console, stop: asyncio.Event) -> int:
    """The whole demo; the exit code (0 pass, 1 fail, 130 interrupted)."""
    ui.banner(opts.duration, opts.writers, opts.data_dir)
    ui.leftovers(prepare_data_dir(opts.data_dir))
    async with DemoCluster(opts.data_dir, supervisor) as cluster:
        try:
            outcome = await _until(stop, _demo(opts, cluster, ui, stop))
            if outcome is None:
                ui.interrupted()
                return 130
            if opts.keep and cluster.etcd is not None:
                ui.keep(cluster.etcd, cluster.pumps, ctl_argv(), outcome.sample_start_ts)
                await stop.wait()
            return 0 if outcome.passed else 1
        finally:
            ui.stopping()
            ui.stopped(await cluster.stop())


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
class Cluster:
    """What the load and the checks need to know about the running cluster."""

    etcd_url: str
    pumps: list[PumpNode]
    cluster_id: int
    leader: str  # name of the pump whose TSO member leads


async def _demo(opts: Options, cluster: DemoCluster, ui: Console, stop: asyncio.Event) -> Outcome:
    started = await _start(cluster, ui)
    ui.step(
        3,
        f"Writing bank transactions: {opts.writers} writers for {opts.duration:g} s, "
        f"~{opts.rollback_ratio:.0%} rolled back",
    )
    load = asyncio.create_task(_load(opts, started, ui, stop), name="demo-load")
    try:
        gen, client_stats = await asyncio.shield(load)
    except asyncio.CancelledError:
        # Interrupted (``stop`` is set): cutting the writers off mid-RPC would
        # leave prewrites dangling, so they finish their transaction first.
        await load
        raise

    ui.step(4, "The cluster as an operator sees it (binlogctl, a separate process)")
    argv, code, output = await run_binlogctl("pumps", "--pd-urls", started.etcd_url)
    ui.command_output(argv, code, output)

    ui.step(5, "Verifying: pulling every pump from commit ts 0 and merging by commit ts")
    upto = max((c.commit_ts for c in gen.committed), default=0)
    feeds = await pull_all(
        [(p.name, p.addr) for p in started.pumps],
        started.cluster_id,
        upto=upto,
        limit=PULL_TIMEOUT,
    )
    verdict = check(gen.committed, gen.books, feeds)
    ui.verdict(verdict)
    ui.result(verdict, gen.stats, client_stats, started.leader)
    sample = next((s.start_ts for s in feeds[0].binlogs), 0)
    return Outcome(verdict.ok, sample)


async def _start(cluster: DemoCluster, ui: Console) -> Cluster:
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
    return Cluster(etcd.url, pumps, cluster_id, leader_name)


async def _load(
    opts: Options, started: Cluster, ui: Console, stop: asyncio.Event
) -> tuple[LoadGenerator, ClientStats]:
    """Run the load generator with a progress line per second; its results and client stats."""
    async with (
        EtcdKv.connect([started.etcd_url]) as kv,
        TsoClient(kv, started.cluster_id) as tso,
        PumpsClient(kv, started.cluster_id, commit_timeout=COMMIT_TIMEOUT) as client,
    ):
        gen = LoadGenerator(tso, client, writers=opts.writers, rollback_ratio=opts.rollback_ratio)
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.TaskGroup() as tg:
            ticker = tg.create_task(_report(gen, client, ui), name="demo-progress")
            await gen.run(opts.duration, stop)
            ticker.cancel()
        ui.load_done(gen.stats, client.stats, loop.time() - began)
        return gen, client.stats


async def _report(gen: LoadGenerator, client: PumpsClient, ui: Console) -> None:
    """One progress line per second while the load runs."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    second, last = 0, 0
    while True:
        second += 1
        await asyncio.sleep(max(0.0, began + second - loop.time()))
        txns = gen.stats.txns
        ui.progress(second, float(txns - last), gen.stats, client.stats)
        last = txns
