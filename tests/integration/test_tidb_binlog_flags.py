"""A real ``binlog-pump`` started the way tidb-operator starts tidb-binlog's pump (Go-style
single-dash flags, tidb-binlog's stock pump.toml, an empty ``-log-file=``) reaches ready and
registers the advertised address; every console script answers ``-V``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tributary.coord.etcd import EtcdKv
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState
from tributary.version import version_text

BIN = Path(sys.executable).parent
STOCK_PUMP_TOML = Path(__file__).resolve().parents[1] / "data" / "tidb-binlog-v8.1.2" / "pump.toml"
SCRIPTS = (
    "binlog-pump",
    "binlog-drainer",
    "binlog-tso",
    "binlogctl",
    "reparo",
    "tributary-check",
    "binlog-workload",
    "binlog-cdc",
)


def stock_pump_toml(tmp_path: Path, grpc_port: int, http_port: int) -> Path:
    """tidb-binlog's pump.toml with only the listen port moved off 8250 (and the HTTP API's
    port given, which tidb-binlog serves on the same port)."""
    text = STOCK_PUMP_TOML.read_text()
    assert 'addr = "127.0.0.1:8250"' in text and 'advertise-addr = ""' in text
    text = text.replace('addr = "127.0.0.1:8250"', f'addr = "127.0.0.1:{grpc_port}"', 1)
    path = tmp_path / "pump.toml"
    path.write_text(f'status-addr = "127.0.0.1:{http_port}"\n{text}')
    return path


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


def wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"pump exited with {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"pump not ready in 60 s: {log.read_text()[-3000:]}")


async def test_pump_started_as_tidb_operator_does_reaches_ready(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    grpc_port, http_port = free_port(), free_port()
    config = stock_pump_toml(tmp_path, grpc_port, http_port)
    advertise = f"127.0.0.1:{grpc_port}"
    log = tmp_path / "pump.out"
    argv = [
        str(BIN / "binlog-pump"),
        "-L=info",
        f"-pd-urls={etcd.endpoint}",
        f"-advertise-addr={advertise}",
        f"-config={config}",
        f"-data-dir={tmp_path / 'pump'}",
        "-log-file=",
    ]
    env = {**os.environ, "PUMP_STORAGE_STOP_WRITE_AT_AVAILABLE_SPACE": "1MiB"}
    proc = start(argv, env, log)
    try:
        wait_ready(proc, f"http://127.0.0.1:{http_port}/ready", log)
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            [record] = await NodeRegistry(kv).list(NodeKind.PUMP)
        assert (record.addr, record.state) == (advertise, NodeState.ONLINE)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text()
    assert "Traceback" not in output and " is ignored: " not in output  # nothing to ignore
    assert "binlog-pump effective configuration" in output  # -log-file= means stderr


def test_every_console_script_answers_dash_v() -> None:
    release = version_text().splitlines()[0]
    for script in SCRIPTS:
        done = subprocess.run([str(BIN / script), "-V"], capture_output=True, timeout=60)
        lines = done.stdout.decode().splitlines()
        assert (done.returncode, lines[0]) == (0, release), script
        assert lines[-2].startswith("Python Version: ") and lines[-3].startswith("Build TS: ")
