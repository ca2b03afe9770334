"""The run: set the world up, then cycles of load + one fault + checks; the figures.

A cycle (``load_seconds`` long): the writers run (bank, and mixed with DDL unless turned off),
the plan's fault fires at its moment and the victim comes back; the writers keep going for
the rest of the cycle, then stop between transactions. Checks, in order: the downstream
checkpoint reaches the last commit ts (the drainer caught up, within ``CATCH_UP``); the checker
finds every table equal (missing rows are lost, extra rows duplicated, different rows either);
the bank total is the invariant on both sides; with the capture cluster, its downstream becomes
equal to the upstream too (within ``CATCH_UP``; what is still missing or extra then counts as
lost or duplicated) and no two captures owned the cluster at once (``captures.OwnerWatch``);
every process is still running. Recovery of a
cycle: from the victim's return until the downstream checkpoint passes a timestamp taken at
that moment (the pipeline delivers again). For the whole run, beside the load: no half
transaction downstream, no TSO regression, one TSO leader at a time (``watch``).

With ``netns`` (``--netns``) each pump, etcd member, the drainer and each capture runs in a
network namespace of its own (``netns.ChaosNet``), the MariaDB servers listen on the bridge's
address, and the partition faults can cut links; a pump cut from etcd that still takes
prewrites after its registration timeout is a violation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos.captures import Captures, OwnerWatch
from bench.chaos.faults import (
    ACTIONS,
    CAPTURE_VICTIMS,
    NET_CAPTURE_VICTIMS,
    VICTIMS,
    Deck,
    Plan,
    draw,
    inject,
)
from bench.chaos.kafka import KafkaSide, duplicates, kafka_side
from bench.chaos.netns import PUMP_ARGS, ChaosNet
from bench.chaos.watch import BankReader, TsoLeaders, TsoProbe
from services.demo.cluster import LOOPBACK, DemoCluster, on_loopback
from tests.support.mariadb import MariaDBServer, make_template, new_server
from tests.support.netns import private_net
from tests.support.pipeline import Pipeline, mysql_checkpoint, running_pipeline
from tributary.checker import compare
from tributary.coord.kv import Kv
from tributary.workload import Bank, Env, Mixed, build_env, open_upstream, run_writers
from tributary.workload.upstream import Upstream

log = logging.getLogger(__name__)

CATCH_UP = 180.0  # seconds the drainer gets to reach the last commit ts after a cycle
PROBE_TIMEOUT = 3.0  # seconds one checkpoint read may take (the downstream may be frozen)


@dataclass(frozen=True)
class Options:
    cycles: int = 5
    seed: int = 1
    load_seconds: float = 6.0
    accounts: int = 100
    bank_rate: float = 40.0  # transfers per second, all writers together
    mixed_rate: float = 8.0  # mixed steps per second; 0: no mixed workload
    writers: int = 4
    victims: tuple[str, ...] = VICTIMS
    sink_query: str = "consistent=true"  # the MySQL sink's options (docs/drainer.md)
    kafka: bool = False  # drainer -> Kafka (exactly once) -> binlog-arbiter -> downstream
    actions: tuple[str, ...] = ACTIONS
    netns: bool = False  # each node in a network namespace of its own; partition faults


@dataclass
class Figures:
    faults: dict[str, int] = field(default_factory=dict)
    plans: list[dict[str, Any]] = field(default_factory=list)
    lost_rows: int = 0
    duplicated_rows: int = 0
    kafka_messages: int | None = None  # --kafka: transactions in the topic (read_committed)
    kafka_duplicates: int | None = None  # --kafka: of them, seen before
    different_rows: int = 0
    recovery_s: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


@dataclass
class World:
    cluster: DemoCluster
    downstream: MariaDBServer
    kv: Kv
    sink_url: str
    upstream_server: MariaDBServer
    pipe: Pipeline
    kafka: KafkaSide | None = None
    captures: Captures | None = None
    capture_down: MariaDBServer | None = None
    net: ChaosNet | None = None


@dataclass
class Load:
    env: Env
    workload: Bank | Mixed
    rate: float


@contextlib.asynccontextmanager
async def world(
    work: Path, sink_query: str, kafka: bool = False, captures: bool = False, netns: bool = False
) -> AsyncIterator[World]:
    """Everything; with ``kafka`` the drainer writes to a broker and an arbiter applies to the
    downstream; with ``captures`` also three captures into a MariaDB of their own; with
    ``netns`` the nodes each in a network namespace (all of them removed on the way out)."""
    if not netns:
        async with _world(work, sink_query, kafka, captures, None) as w:
            yield w
        return
    with private_net() as net:
        async with _world(work, sink_query, kafka, captures, ChaosNet(net)) as w:
            yield w


@contextlib.asynccontextmanager
async def _world(
    work: Path, sink_query: str, kafka: bool, captures: bool, net: ChaosNet | None
) -> AsyncIterator[World]:
    host = LOOPBACK if net is None else net.gateway
    place = on_loopback if net is None else net.place
    template = await asyncio.to_thread(make_template, work / "mariadb-template")
    up = new_server(template, work / "mariadb-upstream", ["--binlog-row-metadata=FULL"], host=host)
    down = new_server(template, work / "mariadb-downstream", host=host)
    servers = [up, down]
    if captures:
        servers.append(new_server(template, work / "mariadb-capture", host=host))
    (work / "cluster").mkdir()
    cdc: Captures | None = None
    try:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
        async with contextlib.AsyncExitStack() as stack:
            side = None
            if kafka:
                side = await stack.enter_async_context(kafka_side(work / "kafka", down))
            pipe = await stack.enter_async_context(
                running_pipeline(
                    work / "cluster",
                    pumps=3,
                    etcd_members=3,
                    place=place,
                    pump_args=PUMP_ARGS if net is not None else (),
                )
            )
            sink = side.sink_url if side is not None else f"{down.dsn()}?{sink_query}"
            await pipe.cluster.start_drainer(sink)
            if side is not None:
                side.start_arbiter()
            if captures:
                assert pipe.cluster.etcd is not None
                (work / "captures").mkdir()
                cdc = Captures(
                    work / "captures",
                    pipe.cluster.etcd.urls,
                    f"{up.dsn()}?server-id=4242",
                    place=place,
                )
                await cdc.start_all(pipe.kv, servers[2].dsn())
            yield World(
                pipe.cluster,
                down,
                pipe.kv,
                sink,
                up,
                pipe,
                kafka=side,
                captures=cdc,
                capture_down=servers[2] if captures else None,
                net=net,
            )
    finally:
        if cdc is not None:
            cdc.kill_all()
        for server in servers:
            await asyncio.to_thread(server.stop)


async def run(work: Path, opts: Options) -> tuple[Figures, dict[str, Any]]:
    rng = random.Random(opts.seed)
    deck = Deck(rng, opts.victims)
    figures = Figures()
    async with (
        world(
            work,
            opts.sink_query,
            kafka=opts.kafka,
            captures=bool(set(opts.victims) & {*CAPTURE_VICTIMS, *NET_CAPTURE_VICTIMS}),
            netns=opts.netns,
        ) as w,
        open_upstream(w.upstream_server.dsn(), writers=16) as upstream,
    ):
        loads = [
            Load(
                *await _setup(w, upstream, Bank("bank", accounts=opts.accounts)),
                rate=opts.bank_rate,
            )
        ]
        if opts.mixed_rate > 0:
            loads.append(Load(*await _setup(w, upstream, Mixed("mixed")), rate=opts.mixed_rate))
        bank = loads[0].workload
        assert isinstance(bank, Bank)
        reader = BankReader(w.downstream, bank.accounts, bank.expected_total)
        probe = TsoProbe(w.pipe.tso)
        leaders = TsoLeaders(w.cluster, w.pipe.cluster_id)
        watches = [reader.run(), probe.run(), leaders.run()]
        owners = None if w.captures is None else OwnerWatch(w.captures, w.kv)
        if owners is not None:
            watches.append(owners.run())
        async with _background(*watches):
            await _settle(w, loads, figures, "setup")
            for cycle in range(1, opts.cycles + 1):
                plan = draw(rng, opts.load_seconds, deck, opts.actions)
                ok = await _cycle(w, loads, plan, cycle, opts, figures)
                if not ok:
                    break
        extra = {
            "half_txns_seen": len(reader.half),
            "bank_samples": reader.complete,
            "tso_calls": probe.calls,
            "ts_regressions": len(probe.regressions),
            "max_tso_gap_s": round(probe.max_gap_s, 2),
            "tso_leader_rounds": leaders.rounds,
            "tso_leader_overlaps": len(leaders.overlaps),
            "commits": sum(x.env.stats.commits for x in loads),
            "rollbacks": sum(x.env.stats.rollbacks for x in loads),
            "retries": sum(x.env.stats.retries for x in loads),
        }
        if owners is not None:
            extra["owner_samples"] = owners.samples
            extra["owners"] = len(owners.owners)
            extra["owner_overlaps"] = len(owners.overlaps)
            if owners.overlaps:
                figures.violations.append(f"two capture owners at once: {owners.overlaps[:5]}")
        if reader.half:
            figures.violations.append(f"half transactions visible downstream: {reader.half[:5]}")
        if probe.regressions:
            figures.violations.append(f"TSO went backwards: {probe.regressions[:5]}")
        if leaders.overlaps:
            figures.violations.append(f"two TSO leaders at once: {leaders.overlaps[:5]}")
        if leaders.regressions:
            figures.violations.append(f"a TSO member went backwards: {leaders.regressions[:5]}")
        if w.net is not None:
            extra["pump_refusals"] = len(w.net.refused_after_s)
            extra["max_pump_refused_after_s"] = max(w.net.refused_after_s, default=None)
            extra["probes_taken"] = w.net.probes_taken
            figures.violations += w.net.violations
        if reader.complete == 0:
            figures.violations.append("the bank reader never saw every account downstream")
        if w.kafka is not None:
            figures.kafka_messages, figures.kafka_duplicates = await duplicates(w.kafka)
            if figures.kafka_duplicates:
                figures.violations.append(
                    f"{figures.kafka_duplicates} transactions twice in the topic (exactly once)"
                )
    return figures, extra


async def _setup(w: World, upstream: Upstream, workload: Bank | Mixed) -> tuple[Env, Bank | Mixed]:
    env = await build_env(upstream, w.pipe.pumps, w.pipe.tso, w.pipe.history)
    await workload.setup(env)
    return env, workload


@contextlib.asynccontextmanager
async def _background(*coros: Any) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(c, name=f"chaos-watch-{i}") for i, c in enumerate(coros)]
    try:
        yield
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _cycle(
    w: World, loads: list[Load], plan: Plan, cycle: int, opts: Options, figures: Figures
) -> bool:
    """One cycle; False when a violation makes going on pointless (nothing caught up)."""
    log.info("cycle %d: %s at %.1f s for %.1f s", cycle, plan.kind, plan.at, plan.hold)
    stop = asyncio.Event()
    writers = [
        asyncio.create_task(
            run_writers(
                x.env,
                x.workload,
                writers=opts.writers,
                rate=x.rate,
                seed=opts.seed * 100_000 + cycle * 10 + i,
                stop=stop,
            ),
            name=f"chaos-load-{i}",
        )
        for i, x in enumerate(loads)
    ]
    began = time.monotonic()
    recovered: list[asyncio.Task[float]] = []

    def returned() -> None:
        back = time.monotonic()
        recovered.append(asyncio.create_task(_recovery(w, back), name="chaos-recovery"))

    what = f"cycle {cycle} ({plan.kind})"
    try:
        await asyncio.sleep(plan.at)
        victim = await inject(w, plan, returned)
        figures.faults[plan.kind] = figures.faults.get(plan.kind, 0) + 1
        figures.plans.append(
            {"cycle": cycle, "kind": plan.kind, "victim": victim, "at": plan.at, "hold": plan.hold}
        )
        await asyncio.sleep(max(1.0, opts.load_seconds - (time.monotonic() - began)))
    except Exception as e:  # the victim did not come back: a finding, and the end of the run
        log.exception("%s: the fault went wrong", what)
        figures.violations.append(f"{what}: could not hit or bring back the victim: {e!r}")
        for task in recovered:
            task.cancel()
        return False
    finally:
        stop.set()
        results = await asyncio.gather(*writers, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            figures.violations.append(f"{what}: the load failed: {r!r}")
    ok = await _settle(w, loads, figures, what)
    for task in recovered:
        try:
            async with asyncio.timeout(CATCH_UP):
                figures.recovery_s.append(await task)
        except TimeoutError:
            figures.violations.append(f"cycle {cycle}: no recovery within {CATCH_UP:.0f} s")
            ok = False
    return ok


async def _recovery(w: World, back: float) -> float:
    ts = await w.pipe.tso.get_ts()
    await _checkpoint_reaches(w, ts, CATCH_UP)
    return time.monotonic() - back


async def _checkpoint_reaches(w: World, ts: int, within: float) -> bool:
    d = w.downstream
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                last = await mysql_checkpoint(d.host, d.port, d.user, d.password)
        except Exception:  # restarting or frozen
            last = None
        if last is not None and last >= ts:
            return True
        await asyncio.sleep(0.1)
    return False


async def _settle(w: World, loads: list[Load], figures: Figures, what: str) -> bool:
    """The end-of-cycle checks (see the module docstring); False if the drainer never caught up."""
    upto = max(x.env.stats.max_commit_ts for x in loads)
    if not await _checkpoint_reaches(w, upto, CATCH_UP):
        figures.violations.append(f"{what}: the drainer did not reach {upto} in {CATCH_UP:.0f} s")
        return False
    report = await compare(w.upstream_server.dsn(), w.downstream.dsn())
    missing = sum(t.missing for t in report.tables)
    extra = sum(t.extra for t in report.tables)
    different = sum(t.different for t in report.tables)
    figures.lost_rows += missing
    figures.duplicated_rows += extra
    figures.different_rows += different
    if not report.equal:
        figures.violations.append(f"{what}: the checker found differences:\n{report.render_text()}")
    bank = loads[0].workload
    assert isinstance(bank, Bank)
    sql = "SELECT COALESCE(SUM(balance), 0) FROM bank.accounts"
    totals = [int((await s.query(sql))[0][0]) for s in (w.upstream_server, w.downstream)]
    if totals != [bank.expected_total] * 2:
        figures.violations.append(
            f"{what}: bank totals upstream {totals[0]}, downstream {totals[1]}, "
            f"expected {bank.expected_total}"
        )
    if w.captures is not None:
        await _captured(w, figures, what)
    children = [*(p.child for p in w.cluster.pumps), *(d.child for d in w.cluster.drainers)]
    if w.kafka is not None and w.kafka.arbiter is not None:
        children.append(w.kafka.arbiter)
    for child in children:
        if not child.running:
            figures.violations.append(
                f"{what}: {child.name} exited by itself; see {child.log_path}"
            )
    return True


async def _captured(w: World, figures: Figures, what: str) -> None:
    """The capture downstream becomes equal to the upstream; every capture still runs."""
    assert w.captures is not None and w.capture_down is not None
    deadline = time.monotonic() + CATCH_UP
    while True:
        try:
            report = await compare(w.upstream_server.dsn(), w.capture_down.dsn())
        except Exception as e:  # a schema not created downstream yet
            log.info("%s: capture downstream not comparable yet: %r", what, e)
            report = None
        if report is not None and report.equal:
            break
        if time.monotonic() > deadline:
            if report is None:
                figures.violations.append(f"{what}: the capture downstream never compared")
            else:
                figures.lost_rows += sum(t.missing for t in report.tables)
                figures.duplicated_rows += sum(t.extra for t in report.tables)
                figures.different_rows += sum(t.different for t in report.tables)
                figures.violations.append(
                    f"{what}: the capture downstream differs:\n{report.render_text()}"
                )
            break
        await asyncio.sleep(1.0)
    for node in w.captures.nodes:
        if node.proc.poll() is not None:
            figures.violations.append(f"{what}: {node.name} exited by itself; see {node.log_path}")
