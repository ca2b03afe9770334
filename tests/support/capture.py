"""A real capture server (``binlog-cdc server``) as a process, its CLI, and upstream writes.

``Captures`` runs several captures of one cluster as processes (``wait_owner``: until one of
them is the owner). ``start_capture`` runs one capture (id ``c0``, a 2 s session TTL, a 0.2 s
checkpoint interval) against an etcd and an upstream MariaDB; ``capture_cli`` runs
``binlog-cdc cli`` against it, retried while it starts; ``write_shop`` commits statements as
one upstream transaction.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from tests.support.net import free_port

if TYPE_CHECKING:
    from tests.support.etcd import EtcdProcess
    from tests.support.mariadb import MariaDBServer

ROOT = Path(__file__).resolve().parents[2]


def start_capture(etcd: str, upstream: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The capture process and its HTTP port; its output is appended to ``log``."""
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.capture",
                "server",
                "--etcd",
                etcd,
                "--addr",
                f"127.0.0.1:{port}",
                "--upstream",
                upstream,
                "--capture-id",
                "c0",
                "--capture-session-ttl",
                "2",
                "--checkpoint-interval",
                "0.2",
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return proc, port


async def capture_cli(port: int, *args: str) -> str:
    """``binlog-cdc cli`` against the capture at ``port``, retried while it starts."""
    async with asyncio.timeout(60):
        while True:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "services.capture",
                "cli",
                "--server",
                f"127.0.0.1:{port}",
                *args,
                cwd=ROOT,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, _ = await proc.communicate()
            if proc.returncode == 0:
                return out.decode()
            await asyncio.sleep(0.5)


async def write_shop(up: MariaDBServer, statements: list[str]) -> None:
    """``statements`` as one transaction in the upstream's ``shop`` database."""
    async with up.connect("shop") as conn, conn.cursor() as cur:
        await cur.execute("BEGIN")
        for sql in statements:
            await cur.execute(sql)
        await cur.execute("COMMIT")


class Captures:
    def __init__(self, etcd: EtcdProcess, upstream: str, logs: Path) -> None:
        self._etcd = etcd
        self._upstream = upstream
        self._logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}

    def start(self, name: str) -> None:
        port = free_port()
        log = open(self._logs / f"{name}-{port}.log", "ab")
        self.procs[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.capture",
                "server",
                "--etcd",
                self._etcd.endpoint,
                "--addr",
                f"127.0.0.1:{port}",
                "--upstream",
                self._upstream,
                "--capture-id",
                name,
                "--capture-session-ttl",
                "2",
                "--checkpoint-interval",
                "0.2",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        self.ports[name] = port

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait()
        self.ports.pop(name)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        self.ports.clear()

    def any_server(self) -> str:
        return f"127.0.0.1:{next(iter(self.ports.values()))}"

    def cli(self, *args: str) -> Any:
        out = subprocess.run(
            [sys.executable, "-m", "services.capture", "cli", "--server", self.any_server(), *args],
            cwd=ROOT,
            capture_output=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr.decode()
        return json.loads(out.stdout)


async def get_json(port: int, path: str) -> Any:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s,
        s.get(f"http://127.0.0.1:{port}{path}") as r,
    ):
        return await r.json()


async def owner_of(c: Captures) -> str | None:
    for port in list(c.ports.values()):
        try:
            data = await get_json(port, "/api/v2/captures")
        except (aiohttp.ClientError, TimeoutError):
            continue
        owners = [i["id"] for i in data["items"] if i["is_owner"] and i["id"] in c.ports]
        if data["total"] == len(c.ports) and owners:
            return str(owners[0])
    return None


async def wait_owner(c: Captures, within: float, not_: str = "") -> str:
    async with asyncio.timeout(within):
        while True:
            owner = await owner_of(c)
            if owner is not None and owner != not_:
                return owner
            await asyncio.sleep(0.2)
