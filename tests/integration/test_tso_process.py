"""The standalone TSO server as real processes: kill -9 of the leader, then a restart."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.election import current_leader
from tributary.coord.etcd import EtcdKv
from tributary.tso.client import TsoClient
from tributary.tso.keys import LEADER_PREFIX

pytestmark = [pytest.mark.etcd, pytest.mark.slow]
WAIT = 60.0
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def tso_process(etcd: EtcdProcess, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.tso", "--pd-urls", etcd.endpoint,
             "--addr", f"127.0.0.1:{port}", "--log-level", "info"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def wait_leader(kv: EtcdKv, not_addr: str | None = None) -> str:
    async with asyncio.timeout(WAIT):
        while True:
            found = await current_leader(kv, LEADER_PREFIX)
            if found is not None and found.value.decode() != not_addr:
                return found.value.decode()
            await asyncio.sleep(0.05)


async def test_kill_leader_process_then_restart(etcd: EtcdProcess, tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    addrs = [f"127.0.0.1:{p}" for p in ports]
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        with (
            tso_process(etcd, ports[0], tmp_path / "tso0.log") as p0,
            tso_process(etcd, ports[1], tmp_path / "tso1.log") as p1,
        ):
            procs = {addrs[0]: p0, addrs[1]: p1}
            leader = await wait_leader(kv)
            cluster_id = await read_cluster_id(kv)
            assert cluster_id is not None
            async with TsoClient(kv, cluster_id, timeout=WAIT) as client:
                got = [await client.get_ts() for _ in range(20)]
                procs[leader].kill()  # no lease revoke: the other waits out the lease
                procs[leader].wait()
                got += [await client.get_ts() for _ in range(20)]
                survivor = await wait_leader(kv)
                assert survivor != leader

                # the killed member comes back and must not go backwards either
                port = ports[addrs.index(leader)]
                with tso_process(etcd, port, tmp_path / "tso-restarted.log"):
                    procs[survivor].send_signal(signal.SIGTERM)  # graceful: resigns at once
                    procs[survivor].wait(timeout=30)
                    assert await wait_leader(kv, not_addr=survivor) == leader
                    got += [await client.get_ts() for _ in range(20)]
    assert got == sorted(got) and len(set(got)) == len(got) == 60
