"""A real capture server (``binlog-cdc server``) as a process, its CLI, and upstream writes.

``start_capture`` runs one capture (id ``c0``, a 2 s session TTL, a 0.2 s checkpoint interval)
against an etcd and an upstream MariaDB; ``capture_cli`` runs ``binlog-cdc cli`` against it,
retried while it starts; ``write_shop`` commits statements as one upstream transaction.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.net import free_port

if TYPE_CHECKING:
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
