"""What grpc-go (under TiDB's pump client, PD's client and tidb-binlog's drainer; here through
tests/go/grpcprobe) makes of our gRPC servers' error replies: the pump's port (in one process
and served by front processes), the drainer's Cistern port and binlog-tso's PD-compatible port,
each a real process.

Every reply must be one grpc-go accepts as gRPC (``:status 200`` and a gRPC content-type with
grpc-status), so the code it reports is ours: UNIMPLEMENTED for an unknown method or service,
INTERNAL for a request message that cannot be decoded (as a grpc-go server answers), and the
code of each refusal (wrong cluster ID, a malformed binlog, a bad count, a stub RPC). grpc-go
reports a reply without a content-type as UNKNOWN "malformed header: missing HTTP
content-type", whatever its grpc-status says.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen
from typing import Any

import aiohttp
import pytest

from tests.support import gobin
from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tests.support.procs import stop_process
from tests.support.pump import start_pump_process
from tests.support.tso import members_up, tso_process
from tests.support.waits import until
from tributary.coord.cluster_id import ensure_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.wire.binlog import WriteBinlogReq
from tributary.wire.binlogext import BacklogReq, TsoRequest

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(900)]  # a first Go build

REPO = Path(__file__).resolve().parents[2]
UNDECODABLE = b"\xff"  # a field key whose varint never ends
UNKNOWN_SERVICE = "/no.such.Service/Call"

Call = tuple[str, bytes, str, str]  # method, request, expected code, text in the message


@pytest.fixture(scope="module")
def go_bin() -> Path:
    return gobin.build()


async def cluster_id_of(etcd: EtcdProcess) -> int:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        return await ensure_cluster_id(kv)


async def probe(go_bin: Path, log: Path, addr: str, calls: list[Call]) -> None:
    """Make ``calls`` with grpc-go on ``addr``; assert each one's code and message."""
    args = [f"{method}={request.hex()}" for method, request, _, _ in calls]
    run = await gobin.start(go_bin, "grpcprobe", log, f"-addr={addr}", *args)
    try:
        summary = await run.summary(within=60)
    finally:
        run.kill()
    seen: list[dict[str, Any]] = summary["calls"]
    assert [s["method"] for s in seen] == [c[0] for c in calls]
    wrong = [
        f"{s['method']} ({code} {text!r} expected): {s['code']} {s['message']!r}"
        for s, (_, _, code, text) in zip(seen, calls, strict=True)
        if s["code"] != code or text not in s["message"]
    ]
    assert not wrong, "\n".join(wrong)


def common(service: str, decodable_method: str) -> list[Call]:
    """What every server must answer alike: unknown names and an undecodable request."""
    return [
        (f"/{service}/NoSuchMethod", b"", "Unimplemented", "Method not found"),
        (UNKNOWN_SERVICE, b"", "Unimplemented", "Method not found"),
        (decodable_method, UNDECODABLE, "Internal", "cannot decode the request"),
    ]


@pytest.mark.parametrize("fronts", [1, 2], ids=["one-process", "front-processes"])
async def test_pump_port_errors_seen_by_grpc_go(
    go_bin: Path, etcd: EtcdProcess, tmp_path: Path, fronts: int
) -> None:
    pump = await asyncio.to_thread(
        start_pump_process, tmp_path / "pump", etcd.endpoint, "--front-processes", str(fronts)
    )
    try:
        cluster = await cluster_id_of(etcd)
        write = "/binlog.Pump/WriteBinlog"  # served by a front itself
        backlog = "/binlogext.PumpStats/Backlog"  # relayed by a front to the writer process
        calls = [
            *common("binlog.Pump", write),
            (backlog, UNDECODABLE, "Internal", "cannot decode the request"),
            (write, bytes(WriteBinlogReq(cluster_id=cluster + 1)), "FailedPrecondition",
             "cluster ID mismatch"),
            (backlog, bytes(BacklogReq(cluster_id=cluster + 1)), "FailedPrecondition",
             "cluster ID mismatch"),
            (write, bytes(WriteBinlogReq(cluster_id=cluster, payload=b"\xff\xff")),
             "InvalidArgument", "malformed binlog"),
            (backlog, bytes(BacklogReq(cluster_id=cluster)), "OK", ""),
        ]  # fmt: skip
        await probe(go_bin, tmp_path / "probe.log", pump.addr, calls)
        assert pump.proc.poll() is None
    finally:
        await asyncio.to_thread(pump.terminate)


@contextmanager
def drainer_process(etcd: EtcdProcess, tmp_path: Path) -> Iterator[tuple[str, Popen[bytes]]]:
    """A drainer (blackhole sink) on a free loopback port: (host:port, process)."""
    addr = f"127.0.0.1:{free_port()}"
    args = ["--addr", addr, "--data-dir", str(tmp_path / "drainer"), "--pd-urls", etcd.endpoint]
    args += ["--initial-commit-ts", "7", "--syncer-sink-uri", "blackhole://"]
    with (tmp_path / "drainer.log").open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.drainer", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        yield addr, proc
    finally:
        stop_process(proc, 30)


async def ready(addr: str, proc: Popen[bytes]) -> bool:
    """Whether the node at ``addr`` answers ``/ready``; it must not have exited."""
    assert proc.poll() is None, f"exited with {proc.returncode}"
    try:
        async with aiohttp.ClientSession() as s, s.get(f"http://{addr}/ready") as r:
            return r.status == 200
    except aiohttp.ClientError:
        return False


async def test_drainer_cistern_errors_seen_by_grpc_go(
    go_bin: Path, etcd: EtcdProcess, tmp_path: Path
) -> None:
    with drainer_process(etcd, tmp_path) as (addr, proc):
        await until(lambda: ready(addr, proc), within=60)
        notify = "/binlog.Cistern/Notify"
        calls = [
            *common("binlog.Cistern", notify),
            ("/binlog.Cistern/DumpDDLJobs", b"", "Unimplemented", "a stub in tidb-binlog"),
            (notify, b"", "OK", ""),
        ]
        await probe(go_bin, tmp_path / "probe.log", addr, calls)


async def test_tso_pd_port_errors_seen_by_grpc_go(
    go_bin: Path, etcd: EtcdProcess, tmp_path: Path
) -> None:
    with tso_process(etcd.endpoint, tmp_path / "tso.log") as (url, _):
        await members_up(url, 1)
        cluster = await cluster_id_of(etcd)
        members = "/pdpb.PD/GetMembers"
        stamps = "/binlogext.Tso/GetTimestamps"
        calls = [
            *common("pdpb.PD", members),
            (stamps, bytes(TsoRequest(cluster_id=cluster + 1, count=1)), "FailedPrecondition",
             "cluster ID mismatch"),
            (stamps, bytes(TsoRequest(cluster_id=cluster, count=0)), "InvalidArgument",
             "count must be"),
            (members, b"", "OK", ""),
        ]  # fmt: skip
        await probe(go_bin, tmp_path / "probe.log", url.removeprefix("http://"), calls)
