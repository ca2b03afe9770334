"""Operating a real drainer: its registry record, HTTP API, gRPC Cistern, metrics, binlogctl's
savepoint and pause-drainer, and close -> offline."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from services.binlogctl.cli import main as binlogctl
from services.drainer.checkpoint import FileCheckpoint
from tests.support.drainer import FAST_PUMP, InOrderSink, drainer_config, running_drainer
from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tests.support.pump import pump_config, running_pump
from tributary.coord.etcd import EtcdKv
from tributary.registry.offline import MARKER, OfflineMarked
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState
from tributary.wire.binlog import CisternStub, DumpBinlogReq, DumpDdlJobsReq, NotifyReq

pytestmark = pytest.mark.etcd


async def test_http_grpc_and_close_to_offline(etcd: EtcdProcess, tmp_path: Path) -> None:
    cfg = drainer_config(tmp_path / "d", etcd.endpoint, initial_commit_ts=0, node_id="drainer-x")
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_drainer(cfg, InOrderSink()) as d,
        aiohttp.ClientSession() as http,
    ):
        node_id = d.started.node_id
        assert node_id == "drainer-x" and d.started.start_ts == 0
        assert await FileCheckpoint(tmp_path / "d").load() == 0  # saved before anything ran
        record = await NodeRegistry(kv).get(NodeKind.DRAINER, node_id)
        assert record is not None
        assert (record.state, record.addr, record.max_commit_ts) == (
            NodeState.ONLINE,
            d.started.advertise_addr,
            0,
        )
        status = await d.get("/status")
        assert status.pop("Sink").startswith(cfg.syncer.sink_scheme() + ":")
        assert status == {"PumpPos": {}, "Synced": False, "LastTS": 0, "TsMap": ""}
        assert await d.get("/commit_ts") == {
            "message": "get drainer's latest ts success!",
            "code": 200,
            "data": {"ts": 0},
        }
        assert await d.get("/ready") == {"ready": True}
        async with http.get(f"{d.http}/metrics") as r:
            text = await r.text()
        for name in (
            "binlog_drainer_checkpoint_tso 0.0",
            "binlog_drainer_disorder_binlog_count 0.0",
            "binlog_drainer_duplicate_binlog_count 0.0",
        ):
            assert name in text

        async with Channel("127.0.0.1", d.started.grpc_port) as channel:
            stub = CisternStub(channel)
            await stub.notify(NotifyReq(), timeout=10)
            with pytest.raises(GRPCError) as e:
                await stub.dump_ddl_jobs(DumpDdlJobsReq(begin_commit_ts=1), timeout=10)
            assert e.value.status is Status.UNIMPLEMENTED and "DumpDDLJobs" in str(e.value.message)
            with pytest.raises(GRPCError) as e:
                async for _ in stub.dump_binlog(DumpBinlogReq(begin_commit_ts=1), timeout=10):
                    pass
            assert e.value.status is Status.UNIMPLEMENTED and "DumpBinlog" in str(e.value.message)

        for path, status in [
            ("/state/someone-else/pause", 404),
            (f"/state/{node_id}/stop", 400),
        ]:
            async with http.put(f"{d.http}{path}") as r:
                assert r.status == status, await r.text()
        async with http.put(f"{d.http}/state/{node_id}/close") as r:
            assert r.status == 200
            assert (await r.json())["state"] == "closing"
        assert await asyncio.wait_for(d.task, 30) is NodeState.OFFLINE
        record = await NodeRegistry(kv).get(NodeKind.DRAINER, node_id)
        assert record is not None and record.state is NodeState.OFFLINE
        store = FileCheckpoint(tmp_path / "d")
        assert await store.load() == 0 and store.consistent is True

        # a closed drainer stays offline when its process is started again (a pod's container
        # restarted by the kubelet before its StatefulSet goes), unless told to rejoin
        assert (tmp_path / "d" / MARKER).exists()
        with pytest.raises(OfflineMarked, match="DRAINER_REJOIN"):
            async with running_drainer(cfg, InOrderSink()):
                pass
        record = await NodeRegistry(kv).get(NodeKind.DRAINER, node_id)
        assert record is not None and record.state is NodeState.OFFLINE
        async with running_drainer(dataclasses.replace(cfg, rejoin=True), InOrderSink()):
            record = await NodeRegistry(kv).get(NodeKind.DRAINER, node_id)
            assert record is not None and record.state is NodeState.ONLINE
        assert not (tmp_path / "d" / MARKER).exists()


async def test_starts_from_generate_meta_and_pauses_through_binlogctl(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    data_dir = tmp_path / "d"
    async with running_pump(pump_config(tmp_path / "p1", etcd.endpoint, **FAST_PUMP)):
        argv = ["generate_meta", "--pd-urls", etcd.endpoint, "--data-dir", str(data_dir)]
        assert await asyncio.to_thread(binlogctl, argv) == 0
        meta = await FileCheckpoint(data_dir).load()
        assert meta is not None and meta > 0
        cfg = drainer_config(data_dir, etcd.endpoint, initial_commit_ts=5)  # the savepoint wins
        async with running_drainer(cfg, InOrderSink()) as d:
            assert d.started.start_ts == meta

            async def moving() -> bool:  # the idle pump's fake binlogs move the checkpoint
                return bool((await d.get("/commit_ts"))["data"]["ts"] > meta)

            async with asyncio.timeout(30):
                while not await moving():  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            argv = [
                "pause-drainer",
                "--node-id",
                d.started.node_id,
                "--pd-urls",
                etcd.endpoint,
                "--status-addr",
                f"127.0.0.1:{d.started.http_port}",
            ]
            assert await asyncio.to_thread(binlogctl, argv) == 0  # waits until paused
            assert await asyncio.wait_for(d.task, 30) is NodeState.PAUSED
        store = FileCheckpoint(data_dir)
        saved = await store.load()
        assert saved is not None and saved > meta and store.consistent is True


def start_drainer_process(*args: str, log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "services.drainer", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[2],
        )


def tail(path: Path) -> str:
    return path.read_text()[-2000:]


async def test_process_stops_on_sigterm_and_records_paused(
    etcd: EtcdProcess, tmp_path: Path
) -> None:
    grpc_port, http_port = free_port(), free_port()
    data_dir = tmp_path / "d"
    log_path = tmp_path / "drainer.log"
    proc = start_drainer_process(
        *("--addr", f"127.0.0.1:{grpc_port}", "--status-addr", f"127.0.0.1:{http_port}"),
        *("--data-dir", str(data_dir), "--pd-urls", etcd.endpoint, "--initial-commit-ts", "7"),
        *("--node-id", "drainer-proc", "--syncer-sink-uri", "blackhole://"),
        log_path=log_path,
    )
    try:
        async with aiohttp.ClientSession() as http, asyncio.timeout(60):
            while True:
                assert proc.poll() is None, tail(log_path)
                try:
                    async with http.get(f"http://127.0.0.1:{http_port}/ready") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0, tail(log_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        record = await NodeRegistry(kv).get(NodeKind.DRAINER, "drainer-proc")
    assert record is not None
    assert (record.state, record.addr, record.max_commit_ts) == (
        NodeState.PAUSED,
        f"127.0.0.1:{grpc_port}",
        7,
    )
    store = FileCheckpoint(data_dir)
    assert await store.load() == 7 and store.consistent is True
