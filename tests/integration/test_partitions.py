"""Network partitions between real processes, each in a network namespace of its own (etcd,
pumps with their embedded TSO members, a drainer into SQLite): a pump cut from etcd, the drainer
cut from one pump, the TSO leader cut from etcd. What must hold: a pump that cannot renew its
registration stops acknowledging prewrites and the pump client moves to another pump; the
drainer waits for a pump it cannot reach instead of skipping it; one TSO leader at a time and no
timestamp going backwards; after the heal, the downstream holds exactly what was acknowledged.

Needs root (``ip netns``, veth, a bridge, nftables); skips with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import StreamTerminatedError

from tests.support import netns
from tests.support.netns_cluster import (
    PUMP_PORT,
    Clients,
    NetCluster,
    caught_up,
    clients,
    create_orders,
    downstream_checkpoint,
    downstream_ids,
    insert,
    netns_cluster,
)
from tests.support.pipeline import ORDERS, row
from tributary.coord.election import current_leader
from tributary.tso.keys import LEADER_PREFIX
from tributary.wire.binlog import Binlog, BinlogType, PumpStub, WriteBinlogReq
from tributary.wire.binlogext import TsoRequest, TsoStub

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def namespaces_possible() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)


@contextlib.asynccontextmanager
async def cluster_with(
    root: Path, pumps: int, drainer: bool = True
) -> AsyncIterator[tuple[NetCluster, Clients]]:
    async with netns_cluster(root) as cluster:
        await cluster.start_etcd()
        await cluster.start_pumps(pumps)
        if drainer:
            await cluster.start_drainer()
        async with clients(cluster) as c:
            yield cluster, c


class Acked:
    """The ids whose transaction the writer saw acknowledged, and the highest commit ts."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.failed: set[int] = set()
        self.last_ts = 0
        self.next_id = 1

    async def write(self, c: Clients, version: int, n: int) -> None:
        for _ in range(n):
            rid, self.next_id = self.next_id, self.next_id + 1
            ts = await insert(c, version, rid)
            if ts is None:
                self.failed.add(rid)
            else:
                self.ids.add(rid)
                self.last_ts = max(self.last_ts, ts)


def channel(addr: str) -> Channel:
    host, port = addr.rsplit(":", 1)
    return Channel(host, int(port))


async def direct_write(addr: str, cluster_id: int, payload: bytes) -> None:
    """One WriteBinlog to one pump, bypassing the pump client; raises GRPCError or a
    connection error."""
    ch = channel(addr)
    try:
        reply = await PumpStub(ch).write_binlog(
            WriteBinlogReq(cluster_id=cluster_id, payload=payload), timeout=5
        )
    finally:
        ch.close()
    if reply.errmsg:
        raise AssertionError(f"pump {addr} answered {reply.errmsg!r}")


async def direct_txn(addr: str, c: Clients, version: int, rid: int) -> int | None:
    """One transaction inserting ``rid``, written straight to the pump at ``addr``: None if its
    prewrite is refused (UNAVAILABLE), else its commit ts once the commit is stored too (it then
    counts as acknowledged)."""
    start = await c.tso.get_ts()
    value = row(ORDERS.id, version, rid)
    prewrite = Binlog(
        tp=BinlogType(BinlogType.Prewrite), start_ts=start, prewrite_key=b"d", prewrite_value=value
    )
    try:
        await direct_write(addr, c.cluster_id, bytes(prewrite))
    except GRPCError as e:
        assert e.status is Status.UNAVAILABLE, e
        return None
    commit_ts = await c.tso.get_ts()
    commit = Binlog(tp=BinlogType(BinlogType.Commit), start_ts=start, commit_ts=commit_ts)
    await direct_write(addr, c.cluster_id, bytes(commit))
    return commit_ts


async def eventually_async(check: Callable[[], Awaitable[bool]], within: float) -> None:
    """Poll an async predicate until it holds (every 0.5 s), failing after ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"{check.__name__} did not hold within {within:.0f} s")


# -- a pump cut from etcd -------------------------------------------------------------------


async def test_a_pump_cut_from_etcd_stops_taking_prewrites_and_loses_nothing(
    namespaces_possible: None, tmp_path: Path
) -> None:
    async with cluster_with(tmp_path, pumps=2) as (cluster, c):
        version = await create_orders(c)
        acked = Acked()
        await acked.write(c, version, 20)
        cut = cluster.pump("pump-1")
        addr = cut.node.addr(PUMP_PORT)
        assert cluster.etcd is not None
        cluster.net.partition(cut.node, cluster.etcd.node)

        # the pump cannot renew its registration: it must refuse prewrites (a probe that gets
        # through before that is a real transaction, committed, and must reach the downstream)
        probe_ids = iter(range(1_000_000, 2_000_000))
        probed: set[int] = set()

        async def refuses() -> bool:
            rid = next(probe_ids)
            if await direct_txn(addr, c, version, rid) is None:
                return True
            probed.add(rid)
            return False

        await eventually_async(refuses, within=60)
        # the client moves every new transaction to the other pump
        await acked.write(c, version, 30)
        assert not acked.failed
        assert await direct_txn(addr, c, version, next(probe_ids)) is None
        assert await cluster.http_status(f"{cut.node.url(PUMP_PORT)}/ready") == 503
        assert cut.child.running  # it refuses; it does not exit

        cluster.net.heal(cut.node, cluster.etcd.node)

        async def takes_again() -> bool:
            rid = next(probe_ids)
            if await direct_txn(addr, c, version, rid) is None:
                return False
            probed.add(rid)
            return True

        await eventually_async(takes_again, within=60)
        await acked.write(c, version, 20)
        await caught_up(cluster.downstream, acked.last_ts)
        assert downstream_ids(cluster.downstream) == acked.ids | probed


# -- the drainer cut from one pump ----------------------------------------------------------


async def test_the_drainer_cut_from_a_pump_waits_for_it_and_catches_up(
    namespaces_possible: None, tmp_path: Path
) -> None:
    async with cluster_with(tmp_path, pumps=2) as (cluster, c):
        version = await create_orders(c)
        acked = Acked()
        await acked.write(c, version, 10)
        await caught_up(cluster.downstream, acked.last_ts)
        assert downstream_ids(cluster.downstream) == acked.ids

        p1, p2 = cluster.pump("pump-1"), cluster.pump("pump-2")
        assert cluster.drainer is not None
        cluster.net.partition(cluster.drainer.node, p1.node)
        held_back = 1_000_000  # a transaction on the unreachable pump ...
        held_ts = await direct_txn(p1.node.addr(PUMP_PORT), c, version, held_back)
        assert held_ts is not None
        later = set(range(2_000_000, 2_000_005))  # ... then later ones on the reachable pump
        for rid in sorted(later):
            assert await direct_txn(p2.node.addr(PUMP_PORT), c, version, rid) is not None
        await acked.write(c, version, 10)  # and more through the client, on either pump

        # the drainer keeps order: nothing committed after the unreachable pump's transaction
        # is applied while that pump cannot be read (watched for as long as the cut lasts)
        for _ in range(40):
            ids = downstream_ids(cluster.downstream)
            checkpoint = downstream_checkpoint(cluster.downstream) or 0
            assert held_back not in ids and not ids & later
            assert checkpoint < held_ts
            await asyncio.sleep(0.25)

        cluster.net.heal(cluster.drainer.node, p1.node)
        last = await c.tso.get_ts()
        await caught_up(cluster.downstream, last)
        assert downstream_ids(cluster.downstream) == acked.ids | later | {held_back}


# -- the TSO leader cut from etcd -----------------------------------------------------------


class TsoProbe:
    """Asks every member, one after the other, for a timestamp; remembers who answered what, in
    the order the answers came."""

    def __init__(self, cluster_id: int, addrs: dict[str, str]) -> None:
        self.cluster_id = cluster_id
        self.channels = {name: channel(addr) for name, addr in addrs.items()}
        self.answers: list[tuple[str, int]] = []

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()

    async def round(self) -> list[str]:
        served = []
        for name, channel in self.channels.items():
            try:
                reply = await TsoStub(channel).get_timestamps(
                    TsoRequest(cluster_id=self.cluster_id, count=1), timeout=1
                )
            except (GRPCError, StreamTerminatedError, OSError, TimeoutError):
                continue
            self.answers.append((name, reply.last))
            served.append(name)
        return served

    def check_increasing(self) -> None:
        stamps = [ts for _, ts in self.answers]
        for (a, x), (b, y) in zip(self.answers, self.answers[1:], strict=False):
            assert y > x, f"timestamp went backwards: {a} gave {x}, then {b} gave {y}"
        assert stamps == sorted(set(stamps))


@contextlib.contextmanager
def tso_probe(cluster_id: int, addrs: dict[str, str]) -> Iterator[TsoProbe]:
    probe = TsoProbe(cluster_id, addrs)
    try:
        yield probe
    finally:
        probe.close()


async def test_the_tso_leader_cut_from_etcd_hands_over_without_going_backwards(
    namespaces_possible: None, tmp_path: Path
) -> None:
    async with cluster_with(tmp_path, pumps=3, drainer=False) as (cluster, c):
        addrs = {p.name: p.node.addr(PUMP_PORT) for p in cluster.pumps}
        by_addr = {a: n for n, a in addrs.items()}
        assert cluster.etcd is not None
        with tso_probe(c.cluster_id, addrs) as probe:
            served: list[str] = []
            for _ in range(120):  # the elected member serves once its first window is saved
                if served := await probe.round():
                    break
                await asyncio.sleep(0.25)
            leader = await current_leader(c.kv, LEADER_PREFIX)
            assert leader is not None
            old = by_addr[leader.value.decode()]
            assert served == [old]
            client_before = await c.tso.get_ts()
            cluster.net.partition(cluster.pump(old).node, cluster.etcd.node)

            # the old leader's lease runs out on its own clock: it stops serving before etcd lets
            # another member in; from the first answer of a new leader on, it never answers
            new: str | None = None
            for _ in range(240):
                served = await probe.round()
                if new is None and served and served[0] != old:
                    new = served[0]
                if new is not None:
                    assert old not in served, f"{old} served after {new} took over"
                    break
                await asyncio.sleep(0.25)
            assert new is not None, "no other member took over the TSO"
            for _ in range(8):
                assert await probe.round() == [new]
            client_during = await c.tso.get_ts()

            cluster.net.heal(cluster.pump(old).node, cluster.etcd.node)
            # the old leader comes back as a follower: it queues behind the new one
            for _ in range(20):
                assert await probe.round() == [new]
                await asyncio.sleep(0.25)
            client_after = await c.tso.get_ts()
            probe.check_increasing()
            assert client_before < client_during < client_after
            leader = await current_leader(c.kv, LEADER_PREFIX)
            assert leader is not None and by_addr[leader.value.decode()] == new
