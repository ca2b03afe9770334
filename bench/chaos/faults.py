"""The faults: which victim, which action, when, for how long; and doing it.

A ``Plan`` is drawn from the run's ``random.Random`` before the cycle starts, so a seed replays
the same sequence of plans. Victims (dealt from a shuffled deck, each once per round): a pump
(by index), the drainer, the downstream MariaDB, the TSO leader (whichever pump leads the
embedded TSO election when the fault fires), a member of the 3-member etcd (by index), and,
when the capture cluster runs (``captures``), a capture (by index) or the capture owner
(whichever leads the owner election when the fault fires).
Actions: ``kill`` (SIGKILL, down for ``hold`` seconds, started again with its data) and ``stop``
(SIGSTOP for ``hold`` seconds, then SIGCONT; long enough, past the 3 s TSO lease, for a stopped
leader to be replaced while it sleeps).

With ``--netns`` there are also links to cut (``NET_VICTIMS``, action ``partition``, held for
``netns.PARTITION_HOLD`` seconds, then healed): a pump from etcd, the drainer from a pump, a
capture or the capture owner from etcd and the other captures (see ``netns``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bench.chaos.captures import Captures, owner_of
from bench.chaos.kafka import KafkaSide
from bench.chaos.netns import PARTITION_HOLD, ChaosNet
from services.demo.cluster import DemoCluster, PumpNode
from tests.support.mariadb import MariaDBServer
from tests.support.pipeline import Pipeline
from tributary.coord.election import current_leader
from tributary.coord.kv import Kv
from tributary.tso.keys import LEADER_PREFIX

log = logging.getLogger(__name__)

BINLOG_VICTIMS = ("pump", "drainer", "downstream", "tso_leader", "etcd")
CAPTURE_VICTIMS = ("capture", "capture_owner")
VICTIMS = BINLOG_VICTIMS + CAPTURE_VICTIMS
KAFKA_VICTIMS = ("arbiter", "broker")  # with --kafka only
NET_VICTIMS = ("pump_etcd", "drainer_pump", "capture_etcd", "owner_etcd")  # with --netns only
NET_CAPTURE_VICTIMS = ("capture_etcd", "owner_etcd")
ACTIONS = ("kill", "stop")
PARTITION = "partition"  # the action of every NET_VICTIMS fault
KILL_HOLD = (0.2, 2.0)  # seconds a killed victim stays down
STOP_HOLD = (1.0, 5.0)  # seconds a stopped victim stays frozen


@dataclass(frozen=True)
class Plan:
    victim: str  # one of VICTIMS, KAFKA_VICTIMS, NET_VICTIMS
    action: str  # one of ACTIONS, or PARTITION for NET_VICTIMS
    at: float  # seconds into the cycle's load
    hold: float  # seconds down, frozen or cut
    index: int = 0  # which pump (pump, drainer_pump), etcd member (etcd) or capture

    @property
    def kind(self) -> str:
        return f"{self.victim}_{self.action}"


class Deck:
    """Victims in a random order, each once per round (reshuffled): a short run meets them all."""

    def __init__(self, rng: random.Random, victims: tuple[str, ...] = VICTIMS) -> None:
        self._rng = rng
        self._victims = victims
        self._left: list[str] = []

    def next(self) -> str:
        if not self._left:
            self._left = list(self._victims)
            self._rng.shuffle(self._left)
        return self._left.pop()


def draw(
    rng: random.Random, load_seconds: float, deck: Deck, actions: tuple[str, ...] = ACTIONS
) -> Plan:
    victim = deck.next()
    action = rng.choice(actions)
    at = rng.uniform(0.5, max(0.6, load_seconds / 2))
    hold = rng.uniform(*(KILL_HOLD if action == "kill" else STOP_HOLD))
    if victim in NET_VICTIMS:
        action, hold = PARTITION, rng.uniform(*PARTITION_HOLD)
    return Plan(victim, action, round(at, 3), round(hold, 3), rng.randrange(3))


class World(Protocol):
    """What a fault needs to reach its victims."""

    cluster: DemoCluster
    downstream: MariaDBServer
    kv: Kv
    sink_url: str
    kafka: KafkaSide | None
    captures: Captures | None
    net: ChaosNet | None
    pipe: Pipeline


Returned = Callable[[], object]


async def inject(world: World, plan: Plan, returned: Returned) -> str:
    """Do ``plan`` now, bring the victim back; the name of the process hit. ``returned`` is
    called when the fault ends: at SIGCONT, or as a killed victim starts again."""
    if plan.victim in NET_VICTIMS:
        if world.net is None:
            raise ValueError(f"victim {plan.victim} needs --netns")
        return await _cut(world, world.net, plan, returned)
    if plan.victim == "downstream":
        return await _hit_downstream(world.downstream, plan, returned)
    if plan.victim == "drainer":
        (drainer,) = world.cluster.drainers
        await _hit(drainer.child.proc, plan, returned)
        if plan.action == "kill":
            await world.cluster.start_drainer(world.sink_url)
        return drainer.name
    if plan.victim == "etcd":
        return await _hit_etcd(world.cluster, plan, returned)
    if plan.victim in KAFKA_VICTIMS:
        if world.kafka is None:
            raise ValueError(f"victim {plan.victim} needs --kafka")
        return await _hit_kafka(world.kafka, plan, returned)
    if plan.victim in CAPTURE_VICTIMS:
        assert world.captures is not None
        return await _hit_capture(world.captures, world.kv, plan, returned)
    pump = await _tso_leader(world) if plan.victim == "tso_leader" else None
    if pump is None:
        pump = world.cluster.pumps[plan.index % len(world.cluster.pumps)]
    await _hit(pump.child.proc, plan, returned)
    if plan.action == "kill":
        await world.cluster.restart_pump(pump)
    return pump.name


async def _cut(world: World, net: ChaosNet, plan: Plan, returned: Returned) -> str:
    """Cut the plan's link, hold it (probing a pump cut from etcd), heal it."""
    cluster = world.cluster
    assert cluster.etcd is not None
    etcds = [m.name for m in cluster.etcd.members or (cluster.etcd,)]
    pump = cluster.pumps[plan.index % len(cluster.pumps)]
    if plan.victim == "pump_etcd":
        victim, others = pump.name, etcds
    elif plan.victim == "drainer_pump":
        (drainer,) = cluster.drainers
        victim, others = drainer.name, [pump.name]
    else:
        assert world.captures is not None
        names = sorted(n.name for n in world.captures.nodes)
        victim = names[plan.index % len(names)]
        if plan.victim == "owner_etcd":
            owner = await owner_of(world.kv, world.captures.keys)
            if owner not in names:
                log.warning("no capture owns the cluster (%s); cutting one by index", owner)
            victim = owner if owner in names else victim
        others = etcds + names
    log.info("%s: cutting %s from %s for %.1f s", plan.kind, victim, others, plan.hold)
    heal = net.cut(victim, others)
    try:
        if plan.victim == "pump_etcd":
            pipe = world.pipe
            await net.hold_pump_cut(pump.name, pump.addr, pipe.cluster_id, pipe.tso, plan.hold)
        else:
            await asyncio.sleep(plan.hold)
    finally:
        heal()
    returned()
    return f"{victim}/{'+'.join(sorted(set(others) - {victim}))}"


async def _tso_leader(world: World) -> PumpNode | None:
    leader = await current_leader(world.kv, LEADER_PREFIX)
    addr = None if leader is None else leader.value.decode()
    found = [p for p in world.cluster.pumps if p.addr == addr]
    if not found:
        log.warning("no pump leads the TSO (%s); hitting a pump by index", addr)
    return found[0] if found else None


async def _hit(proc: subprocess.Popen[Any], plan: Plan, returned: Returned) -> None:
    """SIGKILL and reap, or SIGSTOP; wait ``hold``; SIGCONT a stopped one (always)."""
    log.info("%s of pid %d for %.1f s", plan.kind, proc.pid, plan.hold)
    if plan.action == "kill":
        proc.kill()
        await asyncio.to_thread(proc.wait)
        await asyncio.sleep(plan.hold)
        returned()
        return
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(plan.hold)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    returned()


async def _hit_etcd(cluster: DemoCluster, plan: Plan, returned: Returned) -> str:
    assert cluster.etcd is not None
    members = cluster.etcd.members or (cluster.etcd,)
    member = members[plan.index % len(members)]
    await _hit(member.child.proc, plan, returned)
    if plan.action == "kill":
        await cluster.restart_etcd_member(member)
    return member.name


async def _hit_kafka(side: KafkaSide, plan: Plan, returned: Returned) -> str:
    if plan.victim == "arbiter":
        assert side.arbiter is not None
        await _hit(side.arbiter.proc, plan, returned)
        if plan.action == "kill":
            side.start_arbiter()
        return "arbiter"
    proc = side.broker.proc
    assert proc is not None
    await _hit(proc, plan, returned)
    if plan.action == "kill":
        await side.restart_broker()  # on its data: topics, transactions, offsets kept
    return "broker"


async def _hit_downstream(server: MariaDBServer, plan: Plan, returned: Returned) -> str:
    assert server.proc is not None
    await _hit(server.proc, plan, returned)
    if plan.action == "kill":
        await asyncio.to_thread(server.start)  # crash recovery; blocks until it takes logins
    return "downstream"


async def _hit_capture(captures: Captures, kv: Kv, plan: Plan, returned: Returned) -> str:
    nodes = sorted(captures.nodes, key=lambda n: n.name)
    node = nodes[plan.index % len(nodes)]
    if plan.victim == "capture_owner":
        owner = await owner_of(kv, captures.keys)
        found = [n for n in nodes if n.name == owner]
        if not found:
            log.warning("no capture owns the cluster (%s); hitting one by index", owner)
        node = found[0] if found else node
    await _hit(node.proc, plan, returned)
    if plan.action == "kill":
        captures.start(node.name)
    return node.name
