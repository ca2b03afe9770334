"""Our TSO speaks PD: GetMembers and Tso of ``pdpb.PD``, etcd's API relayed on the same port,
and PD mode discovery, all over real gRPC against a real etcd."""

from __future__ import annotations

import asyncio
import itertools
from contextlib import AsyncExitStack

import pytest
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status

from services.tso.app import TsoServerApp, TsoServerConfig
from tests.support.etcd import EtcdProcess
from tributary.coord.etcd import EtcdKv
from tributary.tso.cluster import PD_CLUSTER_ID_KEY, discover
from tributary.tso.member import MemberTiming
from tributary.tso.pd_client import PdClient, get_members
from tributary.wire import ts
from tributary.wire.pdpb import PdStub, RequestHeader, TsoRequest

pytestmark = pytest.mark.etcd
TIMING = MemberTiming(lease_ttl_s=2, retry_backoff_s=0.1)


def config(etcd: EtcdProcess) -> TsoServerConfig:
    return TsoServerConfig(pd_urls=(etcd.endpoint,), addr="127.0.0.1:0")


async def test_get_members_and_tso_stream_as_pd_answers(etcd: EtcdProcess) -> None:
    async with TsoServerApp(config(etcd), timing=TIMING) as app:
        await asyncio.wait_for(app.member.wait_leading(), 30)
        url = f"http://{app.advertise_addr}"
        members = await get_members(url)
        assert members.header.cluster_id == app.cluster_id
        assert members.leader.client_urls == [url]
        assert [m.client_urls for m in members.members] == [[url]]

        channel = Channel("127.0.0.1", app.port)
        try:
            header = RequestHeader(cluster_id=app.cluster_id)
            requests = [TsoRequest(header=header, count=n) for n in (1, 10, 1000)]
            replies = [r async for r in PdStub(channel).tso(requests)]
            assert [r.count for r in replies] == [1, 10, 1000]
            assert all(r.header.cluster_id == app.cluster_id for r in replies)
            lasts = [ts.compose(r.timestamp.physical, r.timestamp.logical) for r in replies]
            # the ranges (last - count, last] follow each other without overlap
            firsts = [last - r.count + 1 for last, r in zip(lasts, replies, strict=True)]
            assert firsts[1] > lasts[0] and firsts[2] > lasts[1]

            wrong = [TsoRequest(header=RequestHeader(cluster_id=app.cluster_id + 1), count=1)]
            with pytest.raises(GRPCError) as err:
                _ = [r async for r in PdStub(channel).tso(wrong)]
            assert err.value.status is Status.FAILED_PRECONDITION
        finally:
            channel.close()


async def test_etcd_api_is_relayed_on_the_tso_port(etcd: EtcdProcess) -> None:
    async with TsoServerApp(config(etcd), timing=TIMING) as app:
        relayed = f"http://{app.advertise_addr}"
        async with EtcdKv.connect([relayed]) as via_tso, EtcdKv.connect([etcd.endpoint]) as kv:
            await via_tso.put(b"/relay/a", b"1")
            found = await kv.get(b"/relay/a")
            assert found is not None and found.value == b"1"
            lease = await via_tso.grant_lease(5)
            await lease.refresh()
            await via_tso.put(b"/relay/b", b"2", lease=lease.id)

            events = via_tso.watch_prefix(b"/relay/")
            seen = asyncio.create_task(anext(aiter(events)))
            await asyncio.sleep(0.5)
            await kv.put(b"/relay/c", b"3")
            event = await asyncio.wait_for(seen, 10)
            assert event.key == b"/relay/c"
            await lease.revoke()
            assert await kv.get(b"/relay/b") is None


async def test_discover_pd_mode_from_the_tso_and_from_pd_key(etcd: EtcdProcess) -> None:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        standalone = await discover(kv, [etcd.endpoint], create=True)
        assert not standalone.pd and standalone.cluster_id
        async with TsoServerApp(config(etcd), timing=TIMING) as app:
            await asyncio.wait_for(app.member.wait_leading(), 30)
            via_pd = await discover(kv, [f"http://{app.advertise_addr}"])
            assert via_pd.pd and via_pd.cluster_id == app.cluster_id == standalone.cluster_id
            # let the server read the probe's closed connection before it stops: on Python 3.11
            # a stopping asyncio server does not wait for its accepted sockets
            await asyncio.sleep(0.2)
        # PD down, but its etcd says a PD cluster lives here: PD mode, never a second clock
        await kv.put(PD_CLUSTER_ID_KEY, (7712192605283902839).to_bytes(8, "big"))
        down = await discover(kv, [etcd.endpoint], create=True)
        assert down.pd and down.cluster_id == 7712192605283902839


async def test_pd_client_follows_the_leader_and_never_goes_back(etcd: EtcdProcess) -> None:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(TsoServerApp(config(etcd), timing=TIMING))
        await asyncio.wait_for(a.member.wait_leading(), 30)
        b = TsoServerApp(config(etcd), timing=TIMING)
        await b.__aenter__()
        try:
            urls = [f"http://{a.advertise_addr}"]
            for _ in range(300):  # until b campaigns too
                if len((await get_members(urls[0])).members) == 2:
                    break
                await asyncio.sleep(0.1)
            async with PdClient(urls, a.cluster_id, timeout=30) as client:
                before = [await client.get_ts() for _ in range(50)]
                batch = await asyncio.gather(*(client.get_ts() for _ in range(200)))
                assert len(set(batch)) == 200 and min(batch) > before[-1]
                await stack.aclose()  # the leader goes; b takes over
                after = [await client.get_ts() for _ in range(50)]
            sequence = [*before, *sorted(batch), *after]
            assert all(x < y for x, y in itertools.pairwise(sequence))
            assert b.member.is_leader
        finally:
            await b.__aexit__(None, None, None)
