"""TSO servers on real etcd and real gRPC: handover, restarts, concurrency, cluster ID."""

from __future__ import annotations

import asyncio
import bisect
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status

from services.tso.app import TsoServerApp, TsoServerConfig
from tests.support.etcd import EtcdProcess
from tributary.coord.etcd import EtcdKv
from tributary.tso.client import TsoClient
from tributary.tso.clock import SystemClock
from tributary.tso.errors import TsoError
from tributary.tso.member import MemberTiming
from tributary.wire.binlogext import TsoRequest, TsoStub

pytestmark = pytest.mark.etcd
WAIT = 30.0
TIMING = MemberTiming(lease_ttl_s=2, retry_backoff_s=0.1)


@dataclass(frozen=True)
class Call:
    started: float
    ended: float
    ts: int


class SkewedClock(SystemClock):
    """The host clock shifted, as on a machine whose clock is off."""

    def __init__(self, offset_ms: int) -> None:
        self._offset = offset_ms

    def now_ms(self) -> int:
        return super().now_ms() + self._offset


def config(etcd: EtcdProcess) -> TsoServerConfig:
    return TsoServerConfig(pd_urls=(etcd.endpoint,), addr="127.0.0.1:0")


def assert_linearizable(calls: list[Call]) -> None:
    """Every call that started after another ended got a larger timestamp; all unique."""
    assert len({c.ts for c in calls}) == len(calls)
    by_end = sorted(calls, key=lambda c: c.ended)
    ends = [c.ended for c in by_end]
    prefix_max: list[int] = []
    for c in by_end:
        prefix_max.append(max(c.ts, prefix_max[-1]) if prefix_max else c.ts)
    for c in calls:
        before = bisect.bisect_left(ends, c.started)  # calls that ended before c started
        if before:
            assert prefix_max[before - 1] < c.ts


async def collect(client: TsoClient, out: list[Call], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        try:
            ts = await client.get_ts()
        except TsoError as e:
            assert e.retriable
            continue
        out.append(Call(started, loop.time(), ts))
        await asyncio.sleep(0.002)


async def wait_count(calls: list[Call], at_least: int) -> None:
    async with asyncio.timeout(WAIT):
        while len(calls) < at_least:  # noqa: ASYNC110 - polling a plain list
            await asyncio.sleep(0.01)


async def test_leader_closes_other_member_takes_over(etcd: EtcdProcess) -> None:
    calls: list[Call] = []
    stop = asyncio.Event()
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(TsoServerApp(config(etcd), timing=TIMING))
        await asyncio.wait_for(a.member.wait_leading(), WAIT)
        async with (
            TsoServerApp(config(etcd), timing=TIMING) as b,
            EtcdKv.connect([etcd.endpoint]) as kv,
        ):
            assert b.cluster_id == a.cluster_id
            async with TsoClient(kv, a.cluster_id) as c1, TsoClient(kv, a.cluster_id) as c2:
                async with asyncio.TaskGroup() as tg:
                    for i, client in enumerate((c1, c2, c1, c2)):
                        tg.create_task(collect(client, calls, stop), name=f"collect-{i}")
                    await wait_count(calls, 100)
                    await stack.aclose()  # the leader goes away mid-stream
                    await asyncio.wait_for(b.member.wait_leading(), WAIT)
                    switched = len(calls)
                    await wait_count(calls, switched + 100)
                    stop.set()
            assert b.member.is_leader
    assert_linearizable(calls)


async def test_restarted_member_never_goes_backwards(etcd: EtcdProcess) -> None:
    last = 0
    for offset_ms in (0, -20_000, 0, -5_000):  # restarts, some with a clock far behind
        async with (
            TsoServerApp(config(etcd), clock=SkewedClock(offset_ms), timing=TIMING) as app,
            EtcdKv.connect([etcd.endpoint]) as kv,
            TsoClient(kv, app.cluster_id) as client,
        ):
            await asyncio.wait_for(app.member.wait_leading(), WAIT)
            got = [await client.get_ts() for _ in range(20)]
        assert got == sorted(got) and got[0] > last
        last = got[-1]


async def test_concurrent_clients_get_unique_increasing(etcd: EtcdProcess) -> None:
    async with (
        TsoServerApp(config(etcd), timing=TIMING) as app,
        EtcdKv.connect([etcd.endpoint]) as kv,
        AsyncExitStack() as stack,
    ):
        await asyncio.wait_for(app.member.wait_leading(), WAIT)
        clients = [await stack.enter_async_context(TsoClient(kv, app.cluster_id)) for _ in range(4)]

        async def burst(client: TsoClient) -> list[int]:
            out = []
            for _ in range(10):  # each round: 25 concurrent callers on one client
                out += await asyncio.gather(*(client.get_ts() for _ in range(25)))
            return out

        results = await asyncio.gather(*(burst(c) for c in clients))
    everything = [ts for r in results for ts in r]
    assert len(set(everything)) == len(everything) == 1000
    for r in results:  # rounds run one after the other: each round above the previous
        for i in range(25, len(r), 25):
            assert min(r[i : i + 25]) > max(r[i - 25 : i])


async def test_wrong_cluster_id_rejected(etcd: EtcdProcess) -> None:
    async with (
        TsoServerApp(config(etcd), timing=TIMING) as app,
        EtcdKv.connect([etcd.endpoint]) as kv,
    ):
        await asyncio.wait_for(app.member.wait_leading(), WAIT)
        wrong = app.cluster_id ^ 1
        async with TsoClient(kv, wrong, timeout=5) as client:
            with pytest.raises(TsoError) as err:
                await client.get_ts()
        assert not err.value.retriable
        channel = Channel("127.0.0.1", app.port)
        try:
            with pytest.raises(GRPCError) as raw:
                await TsoStub(channel).get_timestamps(TsoRequest(cluster_id=wrong, count=1))
        finally:
            channel.close()
        assert raw.value.status is Status.FAILED_PRECONDITION
        assert raw.value.message is not None and str(app.cluster_id) in raw.value.message


async def test_follower_answers_unavailable_naming_the_leader(etcd: EtcdProcess) -> None:
    async with (
        TsoServerApp(config(etcd), timing=TIMING) as a,
        TsoServerApp(config(etcd), timing=TIMING) as b,
    ):
        await asyncio.wait_for(a.member.wait_leading(), WAIT)
        channel = Channel("127.0.0.1", b.port)
        try:
            with pytest.raises(GRPCError) as raw:
                await TsoStub(channel).get_timestamps(TsoRequest(cluster_id=b.cluster_id, count=1))
        finally:
            channel.close()
        assert raw.value.status is Status.UNAVAILABLE
        assert raw.value.message is not None and a.advertise_addr in raw.value.message
