"""The demo's child processes: start, watch, stop, and never leave one behind.

Every child runs in its own session (a terminal's Ctrl-C reaches only the demo,
which then stops the children in order: pumps before etcd) with its output in a
log file. The :class:`Supervisor` remembers every child it started and writes
their pids to ``<data-dir>/demo.pids``, so a demo that was itself killed -9 has
its leftovers stopped by the next run before the data dir is wiped.

Invariant: when :meth:`Supervisor.kill_all` returns, no child started by this
supervisor is running.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from services.demo.errors import DemoError

log = logging.getLogger(__name__)

PIDS_FILE = "demo.pids"


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _listen_range() -> range:
    """Ports to hand to children: just below the kernel's ephemeral range.

    A port the kernel picked for ``bind(0)`` comes from the ephemeral range, which is also where
    every outgoing connection on the machine takes its local port; between our pick and the
    child's bind, a client connection (an etcd client, a MariaDB driver, a JVM) can take it, and
    the child fails with EADDRINUSE. Ports below that range are only ever taken by listeners.

    Processes that hand out ports side by side (test workers) each take a block of their own:
    ``TRIBUTARY_PORT_BLOCK=i/n`` is the i-th of n equal blocks (0-based), so two of them never
    pick the same free port between the pick and the bind.
    """
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default lower bound
    start, stop = max(1024, low - 12000), low
    index, _, count = os.environ.get("TRIBUTARY_PORT_BLOCK", "0/1").partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = 0, 1
    if n > 1 and 0 <= i < n:
        size = (stop - start) // n
        start, stop = start + i * size, start + (i + 1) * size
    return range(start, stop - 1)  # leaves room for p + 1


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1, outside the ephemeral range, that is free right now."""
    ports = _listen_range()
    for _ in range(200):
        port = random.choice(ports)
        if _bindable(port):
            return port
    raise DemoError("found no free port on 127.0.0.1", retriable=True)


def free_port_pair() -> int:
    """A port ``p`` such that ``p`` and ``p + 1`` are both free right now.

    For a node given a ``--status-addr`` of its own next to its gRPC port.
    """
    for _ in range(200):
        port = free_port()
        if _bindable(port + 1):
            return port
    raise DemoError("found no two adjacent free ports on 127.0.0.1", retriable=True)


def log_tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class Child:
    """One child process with its output in ``log_path``."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as out:
            self.proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        log.info("started %s (pid %d): %s", name, self.proc.pid, " ".join(argv))

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def check_alive(self) -> None:
        """Raise DemoError (with the end of its log) if the child has exited."""
        code = self.proc.poll()
        if code is not None:
            raise DemoError(
                f"{self.name} exited with code {code}; end of {self.log_path}:\n"
                f"{log_tail(self.log_path)}"
            )

    async def stop(self, grace: float) -> int:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; the exit code."""
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        # Popen offers nothing to await, so poll (the exit is seen within 50 ms).
        while self.running and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if self.running:
            log.warning("%s did not stop within %.0f s; killing it", self.name, grace)
            self.kill()
        return self.proc.wait()

    def kill(self) -> None:
        if self.running:
            self.proc.kill()
        self.proc.wait()


class Supervisor:
    """Starts children and guarantees none outlives the demo (short of a kill -9)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.children: list[Child] = []

    def start(self, name: str, argv: Sequence[str], log_path: Path) -> Child:
        child = Child(name, argv, log_path)
        self.children.append(child)
        with open(self.root / PIDS_FILE, "a") as f:
            f.write(f"{child.pid} {name}\n")
        return child

    def kill_all(self) -> None:
        """SIGKILL every child still running and reap them all (sync: safe in any finally)."""
        for child in reversed(self.children):
            if child.running:
                log.warning("killing %s (pid %d)", child.name, child.pid)
            child.kill()


def stop_leftovers(root: Path, timeout: float = 10.0) -> list[str]:
    """Stop processes a previous demo in ``root`` left running; their names.

    A recorded pid counts only while its command line still mentions ``root``
    (pids are reused). Linux only (``/proc``); elsewhere nothing is done.
    """
    pids_file = root / PIDS_FILE
    if not pids_file.exists() or not Path("/proc").is_dir():
        return []
    stopped: list[str] = []
    for line in pids_file.read_text().splitlines():
        pid_text, _, name = line.partition(" ")
        if not pid_text.isdigit() or not _mentions(int(pid_text), str(root)):
            continue
        pid = int(pid_text)
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _mentions(pid, str(root)) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _mentions(pid, str(root)):
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stopped.append(f"{name} (pid {pid})")
    return stopped


def _mentions(pid: int, text: str) -> bool:
    """True while process ``pid`` lives (not a zombie) and its command line contains ``text``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[0] if ")" in stat else "?"
    return state != "Z" and text in cmdline
