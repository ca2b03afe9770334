"""Processes for benchmarks: a private etcd and pumps on loopback ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _etcd_binary() -> str:
    beside = Path(sys.executable).parent / "etcd"
    return str(beside) if beside.exists() else (shutil.which("etcd") or "etcd")


def _wait(check: object, proc: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            if check():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def etcd(workdir: Path) -> Iterator[str]:
    port, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            _etcd_binary(),
            "--data-dir",
            str(workdir / "etcd"),
            "--listen-client-urls",
            url,
            "--advertise-client-urls",
            url,
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-cluster",
            f"default=http://127.0.0.1:{peer}",
            "--log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(
            lambda: socket.create_connection(("127.0.0.1", port), 0.2).close() or True, proc, "etcd"
        )
        yield url
    finally:
        _stop(proc)


@contextmanager
def pump(workdir: Path, name: str, etcd_url: str, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    grpc, http = free_port(), free_port()
    log = open(workdir / f"{name}.log", "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.pump",
            "--addr",
            f"127.0.0.1:{grpc}",
            "--status-addr",
            f"127.0.0.1:{http}",
            "--data-dir",
            str(workdir / name),
            "--pd-urls",
            etcd_url,
            "--storage-stop-write-at-available-space",
            "64MiB",
            "-L",
            "warn",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log.close()

    def ready() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/ready", timeout=1) as r:
            return bool(r.status == 200)

    try:
        _wait(ready, proc, f"pump {name}")
        yield proc
    finally:
        _stop(proc)


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0
