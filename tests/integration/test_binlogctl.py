"""binlogctl against a real etcd and real pumps: listing, repair, pause, offline, errors.

The CLI runs through ``main(argv)`` in a worker thread (it owns its own event loop
while the pump under test runs in the test's loop); stdout/stderr via capsys.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import pytest

from services.binlogctl.cli import main
from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tests.support.pump import RunningPump, pump_config, running_pump
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState, NodeStatus
from tributary.settings import ListenSettings
from tributary.wire import ts as tso

PUMP = NodeKind.PUMP
REPO = Path(__file__).resolve().parents[2]
RECORD_KEYS = {"nodeId", "host", "state", "isAlive", "score", "label", "maxCommitTS", "updateTS"}


async def ctl(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


@asynccontextmanager
async def registry(etcd: EtcdProcess) -> AsyncIterator[NodeRegistry]:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        yield NodeRegistry(kv)


def dead_pump(node_id: str, state: NodeState = NodeState.ONLINE) -> NodeStatus:
    """The record a crashed pump leaves behind (fixed timestamps)."""
    ts = tso.compose(1_700_000_000_123, 7)  # 2023-11-14 22:13:20.123 UTC
    return NodeStatus(node_id, "10.0.0.9:8250", state, max_commit_ts=ts, update_ts=ts + 1)


async def finished(p: RunningPump) -> NodeState:
    return await asyncio.wait_for(asyncio.shield(p.task), 60)


async def test_pumps_lists_table_and_json(
    tmp_path: Path, etcd: EtcdProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        live = p.started.node_id
        async with registry(etcd) as reg:
            await reg.update(PUMP, dead_pump("crashed-1"))
            await reg.update(PUMP, dead_pump("gone-1", NodeState.OFFLINE))

        assert await ctl("pumps", "--pd-urls", etcd.endpoint) == 0
        out = capsys.readouterr().out.splitlines()
        header = "NODE ID ADDRESS STATE MAX COMMIT TS COMMIT TIME UPDATE TIME"
        assert out[0].split() == header.split()
        rows = {line.split()[0]: line for line in out[1:] if not line.startswith("1 offline")}
        assert set(rows) == {"crashed-1", live}
        assert out[-1] == "1 offline hidden; add --show-offline-nodes"
        crashed = rows["crashed-1"].split()
        assert crashed[1:4] == ["10.0.0.9:8250", "online", str(dead_pump("x").max_commit_ts)]
        local = datetime.fromtimestamp(1_700_000_000.123).astimezone()
        assert " ".join(crashed[4:6]) == local.strftime("%Y-%m-%d %H:%M:%S.123")
        assert rows[live].split()[1:3] == [p.addr, "online"]

        # tidb-binlog's spelling; JSON records exactly as stored, offline included.
        code = await ctl(
            "-cmd", "pumps", "-pd-urls", etcd.endpoint, "-show-offline-nodes", "--json"
        )
        assert code == 0
        records = {r["nodeId"]: r for r in json.loads(capsys.readouterr().out)}
        assert set(records) == {"crashed-1", "gone-1", live}
        assert all(set(r) == RECORD_KEYS for r in records.values())
        assert records["gone-1"]["state"] == "offline"
        assert records["crashed-1"] == json.loads(dead_pump("crashed-1").to_json())
        assert records[live]["host"] == p.addr

        assert await ctl("drainers", "--pd-urls", etcd.endpoint, "--json") == 0
        assert json.loads(capsys.readouterr().out) == []


async def test_update_pump_repairs_a_dead_pumps_record(
    etcd: EtcdProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    async with registry(etcd) as reg:
        await reg.update(PUMP, dead_pump("crashed-1"))
        code = await ctl(
            "update-pump",
            "--node-id",
            "crashed-1",
            "--state",
            "offline",
            "--pd-urls",
            etcd.endpoint,
        )
        assert code == 0
        captured = capsys.readouterr()
        assert "warning: update-pump only rewrites" in captured.err
        assert "crashed-1: state online -> offline" in captured.out
        assert await reg.get(PUMP, "crashed-1") == dead_pump("crashed-1", NodeState.OFFLINE)


async def test_pause_pump_via_its_grpc_port(
    tmp_path: Path, etcd: EtcdProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    cfg = dataclasses.replace(
        pump_config(tmp_path / "p", etcd.endpoint), listen=ListenSettings(f"127.0.0.1:{port}")
    )
    async with running_pump(cfg) as p:
        assert p.started.http_port == port  # status-addr unset: HTTP on the gRPC port
        node = p.started.node_id
        assert await ctl("pause-pump", "--node-id", node, "--pd-urls", etcd.endpoint) == 0
        captured = capsys.readouterr()
        assert f"pump {node} is paused" in captured.out
        assert f"pump {node} accepted pause: pausing" in captured.err
        assert await finished(p) is NodeState.PAUSED  # the pump process part exited
        async with registry(etcd) as reg:
            status = await reg.get(PUMP, node)
        assert status is not None and status.state is NodeState.PAUSED

        # A paused pump's API is gone: a clear error, no traceback.
        assert await ctl("pause-pump", "--node-id", node, "--pd-urls", etcd.endpoint) == 1
        err = capsys.readouterr().err
        assert f"cannot reach pump {node} at http://127.0.0.1:{port}/state/" in err
        assert "Traceback" not in err


async def test_offline_pump_without_drainers_goes_offline(
    tmp_path: Path, etcd: EtcdProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    status_addr = f"127.0.0.1:{free_port()}"  # an extra listener, not the gRPC port
    cfg = pump_config(tmp_path / "p", etcd.endpoint, status_addr=status_addr)
    async with running_pump(cfg) as p:
        node = p.started.node_id
        assert p.started.http_port != p.started.grpc_port
        code = await ctl(
            "offline-pump", "--node-id", node, "--status-addr", status_addr,
            "--pd-urls", etcd.endpoint, "--json",
        )  # fmt: skip
        assert code == 0
        captured = capsys.readouterr()
        doc = json.loads(captured.out)
        assert doc["nodeId"] == node and doc["action"] == "offline"
        assert doc["acceptedState"] == "closing" and doc["state"] == "offline"
        assert doc["url"] == f"http://{status_addr}/state/{node}/close"
        assert doc["record"]["state"] == "offline" and set(doc["record"]) == RECORD_KEYS
        assert f"pump {node} accepted offline: closing" in captured.err
        assert await finished(p) is NodeState.OFFLINE
        async with registry(etcd) as reg:
            status = await reg.get(PUMP, node)
        assert status is not None and status.state is NodeState.OFFLINE
        # Offline pumps are hidden from the default listing.
        assert await ctl("pumps", "--pd-urls", etcd.endpoint) == 0
        assert capsys.readouterr().out.strip() == (
            "no online pumps registered (1 offline hidden; add --show-offline-nodes)"
        )


async def test_offline_waits_for_drainers_and_refusals_reach_the_operator(
    tmp_path: Path, etcd: EtcdProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lagging drainer holds a closing pump; its 404/409 answers and the wait's
    timeout reach the operator; repairing the drainer's record lets it go offline."""
    async with (
        running_pump(pump_config(tmp_path / "a", etcd.endpoint)) as a,
        running_pump(pump_config(tmp_path / "b", etcd.endpoint)) as b,
        registry(etcd) as reg,
    ):
        node = a.started.node_id
        a_http = f"127.0.0.1:{a.started.http_port}"
        b_http = f"127.0.0.1:{b.started.http_port}"
        # Pointing at pump b's API while naming pump a: b answers 404.
        code = await ctl(
            "pause-pump", "--node-id", node, "--status-addr", b_http, "--pd-urls", etcd.endpoint
        )
        assert code == 1
        err = capsys.readouterr().err
        assert f"is not pump {node}'s HTTP API (this is pump {b.started.node_id}" in err
        assert "pass --status-addr" in err

        # A drainer (registered after the pumps joined) that has consumed nothing.
        await reg.update(NodeKind.DRAINER, NodeStatus("d1", "127.0.0.1:1", NodeState.ONLINE))
        args = ("--node-id", node, "--status-addr", a_http, "--pd-urls", etcd.endpoint)
        assert await ctl("offline-pump", *args, "--timeout", "1s") == 1
        err = capsys.readouterr().err
        assert f"pump {node} accepted offline: closing" in err
        assert f"pump {node} is still closing after 1 s; the request stands" in err
        assert not a.task.done()  # held by the drainer

        assert await ctl("pause-pump", *args) == 1  # only an online pump takes an action
        assert f"pump {node} refused: pump is closing; pause needs an online pump" in (
            capsys.readouterr().err
        )
        # The drainer is dead: repair its record, and the pump may leave.
        code = await ctl(
            "update-drainer", "--node-id", "d1", "--state", "offline", "--pd-urls", etcd.endpoint
        )
        assert code == 0
        assert await finished(a) is NodeState.OFFLINE
        assert not b.task.done()


async def test_unknown_node_id_names_the_known_ones(
    etcd: EtcdProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BINLOGCTL_PD_URLS", etcd.endpoint)  # settings from the environment
    async with registry(etcd) as reg:
        await reg.update(PUMP, dead_pump("pump-a"))
        await reg.update(PUMP, dead_pump("pump-b", NodeState.OFFLINE))
    for argv in (
        ["pause-pump", "--node-id", "nope"],
        ["update-pump", "--node-id", "nope", "--state", "paused"],
    ):
        assert await ctl(*argv) == 1
        err = capsys.readouterr().err
        assert "no pump with node id 'nope' in etcd; registered pumps: pump-a, pump-b" in err
        assert "Traceback" not in err
    assert await ctl("offline-drainer", "--node-id", "d1") == 1
    assert "no drainers are registered" in capsys.readouterr().err


async def test_unreachable_etcd_and_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    assert await ctl("pumps", "--pd-urls", endpoint) == 1
    err = capsys.readouterr().err
    assert f"binlogctl: pumps failed: cannot reach etcd at {endpoint} (--pd-urls)" in err
    assert "Traceback" not in err
    assert await ctl("update-pump", "--pd-urls", endpoint) == 2
    err = capsys.readouterr().err
    assert "update-pump needs --node-id" in err and "update-pump needs --state" in err


async def test_generate_meta_writes_a_recent_tso(
    tmp_path: Path, etcd: EtcdProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib

    from tributary.coord.cluster_id import read_cluster_id
    from tributary.tso.client import TsoClient

    # Without a cluster (no pump ever ran) there is no TSO to ask.
    assert await ctl("generate_meta", "--pd-urls", etcd.endpoint, "--data-dir", "x") == 1
    assert "holds no cluster ID" in capsys.readouterr().err

    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)):  # embeds the TSO
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            cluster_id = await read_cluster_id(kv)
            assert cluster_id is not None
            async with TsoClient(kv, cluster_id) as client:
                before = await client.get_ts()
        data_dir = tmp_path / "meta"
        code = await ctl("generate_meta", "--pd-urls", etcd.endpoint, "--data-dir", str(data_dir))
        assert code == 0
    savepoint = data_dir / "savepoint"
    commit_ts = tomllib.loads(savepoint.read_text())["commitTS"]
    assert isinstance(commit_ts, int) and commit_ts > before  # from the same TSO, later
    # Its physical part is wall-clock milliseconds of about now.
    assert abs(tso.physical_ms(commit_ts) / 1000 - datetime.now().timestamp()) < 120
    out = capsys.readouterr().out
    assert out.startswith(f"commitTS = {commit_ts}\n# UTC:   ")
    assert f"(written to {savepoint})" in out


async def test_cli_as_a_subprocess(etcd: EtcdProcess) -> None:
    async with registry(etcd) as reg:
        await reg.update(PUMP, dead_pump("crashed-1"))
    proc = await asyncio.create_subprocess_exec(
        *(
            sys.executable,
            "-m",
            "services.binlogctl",
            "pumps",
            "--pd-urls",
            etcd.endpoint,
            "--json",
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert json.loads(out) == [json.loads(dead_pump("crashed-1").to_json())]
