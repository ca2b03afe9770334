"""binlog-tso as a child process, and waiting for its PD-protocol members, for tests that point
PD clients (PD's Go client, TiDB's pump client) at our TSO."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.net import free_port
from tributary.tso.pd_client import get_members

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def tso_process(etcd_url: str, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A binlog-tso on a free loopback port; yields its URL (``http://host:port``)."""
    addr = f"127.0.0.1:{free_port()}"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.tso", "--pd-urls", etcd_url, "--addr", addr],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        yield f"http://{addr}", proc
    finally:
        proc.kill()
        proc.wait()


async def members_up(url: str, count: int, within: float = 60.0) -> str:
    """The leader's URL once ``count`` members campaign and one leads (asked at ``url``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        try:
            reply = await get_members(url)
        except Exception:
            reply = None
        if reply is not None and reply.leader is not None and len(reply.members) == count:
            return str(reply.leader.client_urls[0])
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url}: no leader among {count} TSO members within {within:.0f} s")
