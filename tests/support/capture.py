"""A real capture server (``binlog-cdc server``) as a process, its CLI, and upstream writes.

``Captures`` runs several captures of one cluster as processes (``wait_owner``: until one of
them is the owner). ``start_capture`` runs one capture (id ``c0``, a 2 s session TTL, a 0.2 s
checkpoint interval) against an etcd and an upstream MariaDB; ``capture_cli`` runs
``binlog-cdc cli`` against it, retried while it starts; ``write_shop`` commits statements as
one upstream transaction, ``shop_load`` random ones until told to stop; ``shop_equal`` asks the
checker whether the downstream's ``shop`` equals the upstream's; ``wait_for`` polls a check.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from tests.support.net import free_port
from tributary.checker.compare import compare
from tributary.checker.errors import CheckerError

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


async def shop_load(
    up: MariaDBServer,
    tables: Sequence[str],
    stop: asyncio.Event,
    *,
    seed: int,
    most_tables: int,
    keys: int,
    mixed: bool = False,
    late: asyncio.Event | None = None,
) -> int:
    """Random transactions in the upstream's ``shop`` until ``stop``; how many committed.

    Each touches 1 to ``most_tables`` of ``tables``, each at a key in 1..``keys``: an insert
    that adds 1 to ``v`` on a duplicate key or, with ``mixed``, that (half the time), an update
    (3 in 10) or a delete (1 in 5). Once ``late`` is set, each also inserts a row into
    ``shop.late`` (a table created mid-run). ``seed`` makes the run repeatable.
    """
    rng = random.Random(seed)
    n = 0
    async with up.connect("shop") as conn, conn.cursor() as cur:
        while not stop.is_set():
            await cur.execute("BEGIN")
            for table in rng.sample(tables, rng.randint(1, most_tables)):
                key = rng.randint(1, keys)
                op = rng.random() if mixed else 0.0
                if op < 0.5:
                    await cur.execute(
                        f"INSERT INTO {table} (id, v) VALUES (%s, %s) "
                        "ON DUPLICATE KEY UPDATE v = v + 1",
                        (key, n),
                    )
                elif op < 0.8:
                    await cur.execute(f"UPDATE {table} SET v = %s WHERE id = %s", (n, key))
                else:
                    await cur.execute(f"DELETE FROM {table} WHERE id = %s", (key,))
            if late is not None and late.is_set():
                await cur.execute("INSERT INTO late (v) VALUES (%s)", (n,))
            await cur.execute("COMMIT")
            n += 1
            await asyncio.sleep(0.01)
    return n


async def shop_equal(up: MariaDBServer, down: MariaDBServer, tables: int) -> bool:
    """Whether the checker finds ``shop`` equal on both sides, with ``tables`` tables; False
    while it cannot compare yet (a table or the database still missing downstream)."""
    try:
        report = await compare(up.dsn("shop"), down.dsn("shop"))
    except CheckerError:
        return False
    return report.equal and len(report.tables) == tables


async def wait_for(check: Callable[[], Awaitable[Any]], within: float, what: str) -> Any:
    """Poll ``check`` until it returns something true, and return that; an AssertionError
    naming ``what`` after ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            while True:
                got = await check()
                if got:
                    return got
                await asyncio.sleep(0.3)
    except TimeoutError:
        raise AssertionError(f"not within {within} s: {what}") from None


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
