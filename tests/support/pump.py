"""Run real pumps for tests: in this process (fast) or as a child process (for SIGKILL)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from services.pump.app import Started, serve
from tests.support.net import free_port
from tributary.config.pump import PumpConfig, StorageConfig
from tributary.registry.status import NodeState
from tributary.settings import ListenSettings


def pump_config(data_dir: Path, etcd_endpoint: str, **overrides: Any) -> PumpConfig:
    """A pump config for loopback tests: ephemeral ports, small disk threshold; its
    ``front-processes`` is ``PUMP_FRONT_PROCESSES`` when set (as for a pump process), else the
    default."""
    fronts = os.environ.get("PUMP_FRONT_PROCESSES")
    if fronts is not None:
        overrides.setdefault("front_processes", int(fronts))
    storage = overrides.pop("storage", StorageConfig(stop_write_at_available_space=1 << 20))
    return dataclasses.replace(
        PumpConfig(),
        listen=ListenSettings("127.0.0.1:0"),
        data_dir=str(data_dir),
        pd_urls=(etcd_endpoint,),
        storage=storage,
        **overrides,
    )


@dataclasses.dataclass
class RunningPump:
    started: Started
    stop: asyncio.Event
    task: asyncio.Task[NodeState]

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.started.grpc_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.started.http_port}"


@asynccontextmanager
async def running_pump(cfg: PumpConfig) -> AsyncIterator[RunningPump]:
    """Serve a pump in this event loop; pause it (stop) on exit."""
    stop = asyncio.Event()
    ready: asyncio.Future[Started] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(cfg, stop, lambda s: ready.set_result(s)), name=f"test-pump-{cfg.data_dir}"
    )
    waiters: set[asyncio.Future[Any]] = {task, ready}
    done, _ = await asyncio.wait(waiters, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()  # raises the startup error
        raise RuntimeError("pump exited before it started")
    if ready not in done:
        task.cancel()
        raise TimeoutError("pump did not start within 60 s")
    pump = RunningPump(ready.result(), stop, task)
    try:
        yield pump
    finally:
        stop.set()
        if not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 30)
            except TimeoutError:
                task.cancel()
        if not task.cancelled():
            task.exception()


@dataclasses.dataclass
class PumpProcess:
    """A pump in a child process (``python -m services.pump``)."""

    proc: subprocess.Popen[bytes]
    grpc_port: int
    http_port: int
    log_path: Path

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def terminate(self, timeout: float = 30) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout)


def start_pump_process(
    data_dir: Path, etcd_endpoint: str, *extra: str, grpc_port: int = 0, http_port: int = 0
) -> PumpProcess:
    grpc_port = grpc_port or free_port()
    http_port = http_port or free_port()
    log_path = data_dir.parent / f"{data_dir.name}.log"
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.pump",
            "--addr",
            f"127.0.0.1:{grpc_port}",
            "--status-addr",
            f"127.0.0.1:{http_port}",
            "--data-dir",
            str(data_dir),
            "--pd-urls",
            etcd_endpoint,
            "--storage-stop-write-at-available-space",
            "1MiB",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=Path(__file__).resolve().parents[2],
    )
    log.close()
    pump = PumpProcess(proc, grpc_port, http_port, log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"pump exited with {proc.returncode}: {log_path.read_text()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(f"{pump.http}/ready", timeout=1) as r:
                if r.status == 200:
                    return pump
        except OSError:
            pass
        time.sleep(0.1)
    pump.kill()
    raise TimeoutError(f"pump did not become ready: {log_path.read_text()[-2000:]}")


def http_json(url: str, method: str = "GET") -> Any:
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())
