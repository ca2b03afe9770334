"""A pump served by front processes (``front-processes = 2``) under load: SIGKILL of a front,
or of the storage writer, loses no acknowledged binlog, and every acknowledged transaction is
pulled exactly once, in commit-ts order, with its prewrite value.

Writers behave as TiDB's pump client: a failed call is retried on a new connection (the
kernel gives it to a front that is alive); a transaction whose prewrite was not acknowledged
is rolled back (the pump may have stored it), a commit not acknowledged is sent again.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from grpclib.exceptions import GRPCError, StreamTerminatedError

from tests.support.etcd import EtcdProcess
from tests.support.pump import PumpProcess, start_pump_process
from tests.support.stubs import commit, prewrite, pull, pump_stub, rollback, write
from tributary.wire.binlog import BinlogType

FRONTS = ("--front-processes", "2", "--gen-binlog-interval", "1")
FAILURES = (GRPCError, StreamTerminatedError, OSError, TimeoutError)


def children(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def wait_for(check: object, what: str, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.05)


@dataclass
class Ledger:
    """What the writers sent and what the pump acknowledged."""

    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1000, 10))
    acked_prewrites: dict[int, bytes] = field(default_factory=dict)
    acked_commits: set[int] = field(default_factory=set)
    unsettled: set[int] = field(default_factory=set)  # prewrite sent, outcome unknown
    uncommitted: set[int] = field(default_factory=set)  # prewrite acked, commit not yet
    failures: int = 0


async def retry(pump: PumpProcess, cluster_id: int, payload: bytes, stop: asyncio.Event) -> bool:
    """Send until acknowledged, reconnecting after each failure; False if stopped first."""
    while not stop.is_set():
        try:
            async with pump_stub(pump.addr) as stub:
                await write(stub, cluster_id, payload)
                return True
        except FAILURES:
            await asyncio.sleep(0.05)
    return False


async def writer(pump: PumpProcess, cluster_id: int, led: Ledger, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            async with pump_stub(pump.addr) as stub:
                while not stop.is_set():
                    start = next(led.counter)
                    value = f"txn-{start}".encode() * 30
                    led.unsettled.add(start)
                    await write(stub, cluster_id, prewrite(start, value))
                    led.unsettled.discard(start)
                    led.acked_prewrites[start] = value
                    led.uncommitted.add(start)
                    await write(stub, cluster_id, commit(start, start + 1))
                    led.uncommitted.discard(start)
                    led.acked_commits.add(start + 1)
        except FAILURES:
            led.failures += 1
            await asyncio.sleep(0.05)  # then a new connection, as TiDB's client retries


async def settle(pump: PumpProcess, cluster_id: int, led: Ledger) -> None:
    """Roll back what may be half-stored, send the missing commits (as a writer would)."""
    never = asyncio.Event()
    for start in sorted(led.unsettled):
        assert await retry(pump, cluster_id, rollback(start), never)
    for start in sorted(led.uncommitted):
        assert await retry(pump, cluster_id, commit(start, start + 1), never)
        led.acked_commits.add(start + 1)


async def check_pulled_exactly_once(pump: PumpProcess, cluster_id: int, led: Ledger) -> None:
    n = len(led.acked_prewrites)
    async with pump_stub(pump.addr) as stub:
        got = await pull(stub, cluster_id, after=0, count=n + 1, skip_fake=False)
    ours, after = got[:n], got[n]
    assert after.tp == BinlogType.Rollback and after.start_ts == after.commit_ts, (
        "more transactions pulled than were written"
    )
    commit_ts = [b.commit_ts for b in ours]
    assert commit_ts == sorted(set(commit_ts)), "out of order or pulled twice"
    by_commit = {b.commit_ts: b for b in ours}
    for start, value in led.acked_prewrites.items():
        b = by_commit.get(start + 1)
        assert b is not None, f"acknowledged transaction {start} is missing"
        assert b.start_ts == start and b.prewrite_value == value
    assert led.acked_commits == set(by_commit)


async def run_load(pump: PumpProcess, cluster_id: int, led: Ledger, until: int) -> None:
    await wait_for(lambda: len(led.acked_commits) >= until, f"{until} commits acknowledged")


async def test_sigkill_of_a_front_under_load(tmp_path: Path, etcd: EtcdProcess) -> None:
    pump = start_pump_process(tmp_path / "pump", etcd.endpoint, *FRONTS)
    try:
        cluster_id = await _cluster_id(etcd)
        fronts = children(pump.proc.pid)
        assert len(fronts) == 2, f"expected two front processes, found {fronts}"
        led, stop = Ledger(), asyncio.Event()
        writers = [asyncio.create_task(writer(pump, cluster_id, led, stop)) for _ in range(8)]
        await run_load(pump, cluster_id, led, 300)
        victim = min(fronts)
        os.kill(victim, signal.SIGKILL)
        await wait_for(lambda: not alive(victim), "the front died")
        await run_load(pump, cluster_id, led, len(led.acked_commits) + 300)
        await wait_for(
            lambda: len(children(pump.proc.pid) - {victim}) == 2, "the dead front replaced"
        )
        await run_load(pump, cluster_id, led, len(led.acked_commits) + 200)
        stop.set()
        await asyncio.gather(*writers)
        assert pump.proc.poll() is None, "the writer process must outlive a front"
        await settle(pump, cluster_id, led)
        await check_pulled_exactly_once(pump, cluster_id, led)
    finally:
        pump.terminate()
    assert not any(alive(p) for p in fronts | children(pump.proc.pid))


async def test_sigkill_of_the_writer_under_load(tmp_path: Path, etcd: EtcdProcess) -> None:
    data_dir = tmp_path / "pump"
    pump = start_pump_process(data_dir, etcd.endpoint, *FRONTS)
    cluster_id = await _cluster_id(etcd)
    fronts = children(pump.proc.pid)
    assert len(fronts) == 2
    led, stop = Ledger(), asyncio.Event()
    writers = [asyncio.create_task(writer(pump, cluster_id, led, stop)) for _ in range(8)]
    await run_load(pump, cluster_id, led, 300)
    pump.kill()  # SIGKILL of the storage writer, the fronts' parent
    # every front sees its link break, fails what it holds as retriable and exits
    await wait_for(lambda: not any(alive(p) for p in fronts), "the fronts exited")
    acked_at_kill = len(led.acked_commits)

    pump = start_pump_process(data_dir, etcd.endpoint, *FRONTS, grpc_port=pump.grpc_port)
    try:
        await run_load(pump, cluster_id, led, acked_at_kill + 300)  # writers reconnect
        stop.set()
        await asyncio.gather(*writers)
        assert led.failures > 0, "the writers never noticed the kill"
        await settle(pump, cluster_id, led)
        await check_pulled_exactly_once(pump, cluster_id, led)
    finally:
        pump.terminate()


async def _cluster_id(etcd: EtcdProcess) -> int:
    from tributary.coord.cluster_id import read_cluster_id
    from tributary.coord.etcd import EtcdKv

    async with EtcdKv.connect([etcd.endpoint]) as kv:
        cid = await read_cluster_id(kv)
    assert cid is not None
    return cid
