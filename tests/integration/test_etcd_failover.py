"""EtcdKv against a real 3-member etcd: when the member the client talks to is frozen
(SIGSTOP) or killed, requests, leases, an election and watches carry on through the other
two, which still have a quorum; a txn sent again after an unknown outcome never answers
wrongly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from services.demo.cluster import DemoCluster, Etcd
from services.demo.procs import Supervisor
from tributary.coord.election import Election
from tributary.coord.etcd import EtcdKv
from tributary.coord.kv import Compare, CompareOp, OutcomeUnknown, Put, WatchEvent

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(120)]

FREEZE = 5.0  # seconds: longer than the 3 s leases below


@pytest.fixture
async def etcd3(tmp_path: Path) -> AsyncIterator[Etcd]:
    supervisor = Supervisor(tmp_path)
    try:
        async with DemoCluster(tmp_path, supervisor) as cluster:
            yield await cluster.start_etcd(members=3)
    finally:
        supervisor.kill_all()


def member_at(etcd: Etcd, endpoint: str) -> Etcd:
    (found,) = [m for m in etcd.members if m.url == endpoint]
    return found


@contextlib.contextmanager
def frozen(member: Etcd) -> Iterator[None]:
    os.kill(member.child.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(member.child.proc.pid, signal.SIGCONT)


async def collect(kv: EtcdKv, prefix: bytes, into: list[WatchEvent], grew: asyncio.Event) -> None:
    async for event in kv.watch_prefix(prefix):
        into.append(event)
        grew.set()


async def test_a_frozen_member_is_left_for_the_others(etcd3: Etcd) -> None:
    async with EtcdKv.connect(etcd3.urls) as kv:
        first = kv.endpoint
        assert first == etcd3.members[0].url
        lease = await kv.grant_lease(3)
        await kv.put(b"/f/leased", b"x", lease.id)
        seen: list[WatchEvent] = []
        grew = asyncio.Event()
        watcher = asyncio.create_task(collect(kv, b"/w/", seen, grew), name="test-watch")
        async with Election(kv, b"/e/", b"me", ttl=3) as election:
            await election.campaign()
            await kv.put(b"/w/0", b"before")
            written = [b"/w/0"]
            with frozen(member_at(etcd3, first)):
                loop = asyncio.get_running_loop()
                until = loop.time() + FREEZE
                i = 0
                while loop.time() < until:
                    i += 1
                    await lease.refresh()
                    key = f"/w/{i}".encode()
                    await kv.put(key, str(i).encode())
                    written.append(key)
                    got = await kv.get(key)
                    assert got is not None and got.value == str(i).encode()
                    await asyncio.sleep(0.5)
                assert kv.endpoint != first
                # every lease outlived the freeze: refreshed through another member
                assert await kv.get(b"/f/leased") is not None
                assert not election.lost.is_set() and election.is_leader()
                async with asyncio.timeout(10):
                    while len(seen) < len(written):
                        grew.clear()
                        await grew.wait()
            assert [e.key for e in seen] == written  # each once, in order, across the move
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def test_a_killed_member_is_left_for_the_others(etcd3: Etcd) -> None:
    async with EtcdKv.connect(etcd3.urls) as kv:
        lease = await kv.grant_lease(3)
        victim = member_at(etcd3, kv.endpoint)
        victim.child.proc.kill()
        victim.child.proc.wait()
        for i in range(5):
            await lease.refresh()
            rev = await kv.put(b"/k", str(i).encode(), lease.id)
            got = await kv.get(b"/k")
            assert got is not None and got.mod_revision == rev
            await asyncio.sleep(1.0)
        assert kv.endpoint != victim.url


async def test_a_txn_resent_after_an_unknown_outcome_reports_it(etcd3: Etcd) -> None:
    async with EtcdKv.connect(etcd3.urls) as kv:
        await kv.put(b"/t/taken", b"someone")
        absent = Compare(b"/t/taken", CompareOp.VERSION_EQUAL, 0)
        free = Compare(b"/t/free", CompareOp.VERSION_EQUAL, 0)
        with frozen(member_at(etcd3, kv.endpoint)):
            # the first attempt goes to the frozen member and is never answered: whether it
            # applied is unknown, so a failed compare on the resend is no answer
            with pytest.raises(OutcomeUnknown):
                await kv.txn([absent], [Put(b"/t/taken", b"me")])
        with frozen(member_at(etcd3, kv.endpoint)):
            # compares that hold on the resend: the txn applied there; compares that fail
            # on a resend: an earlier attempt applied it (a member that had no raft leader
            # for a moment forwards the request once it has one), which is no answer either
            with contextlib.suppress(OutcomeUnknown):
                assert (await kv.txn([free], [Put(b"/t/free", b"me")])).succeeded
        for key, value in ((b"/t/taken", b"someone"), (b"/t/free", b"me")):
            got = await kv.get(key)
            assert got is not None and got.value == value and got.version == 1
