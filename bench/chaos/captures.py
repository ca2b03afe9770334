"""The capture cluster in a chaos run: three ``services.capture`` servers reading the bank
upstream's binlog into a MariaDB of their own through one changefeed, and an owner watch.

Started only when a capture victim is chosen (``capture``: one by index; ``capture_owner``:
whichever leads the owner election when the fault fires). ``OwnerWatch`` samples, every
0.2 s, the owner election in etcd (its oldest key names the owner) and each capture's own
``/api/v2/status``; a sample where two captures each say they own the cluster, or one says
so while etcd names another, is an overlap (two owners at a time). A frozen capture cannot
answer; once it wakes its own lease deadline has passed, so it must not claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from services.demo.cluster import Place, on_loopback
from services.demo.procs import free_port
from tributary.cdc.keys import Keys
from tributary.coord.election import current_leader
from tributary.coord.kv import Kv

ROOT = Path(__file__).resolve().parents[2]
CHANGEFEED = "chaos"
SESSION_TTL = 3  # seconds: the captures' lease (``--capture-session-ttl``)
_HTTP = aiohttp.ClientTimeout(total=1.0)


@dataclass
class CaptureNode:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class Captures:
    """Three capture servers under ``root``; ``kill_all`` on the way out. ``place`` says where
    each runs (as ``DemoCluster`` takes it)."""

    def __init__(
        self, root: Path, etcd_urls: list[str], upstream_dsn: str, place: Place = on_loopback
    ) -> None:
        self.root = root
        self._place = place
        self._etcd = ",".join(etcd_urls)
        self._upstream = upstream_dsn
        self.nodes: list[CaptureNode] = []
        self.keys = Keys()

    def start(self, name: str) -> CaptureNode:
        port = free_port()
        host, prefix = self._place(name)
        log_path = self.root / f"{name}.log"
        with open(log_path, "ab") as log:
            argv = [*prefix, sys.executable, "-m", "services.capture", "server"]
            argv += ["--etcd", self._etcd, "--addr", f"{host}:{port}", "--upstream", self._upstream]
            argv += ["--capture-id", name, "--capture-session-ttl", str(SESSION_TTL)]
            argv += ["--checkpoint-interval", "0.2"]
            proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        node = CaptureNode(name, port, proc, log_path, host)
        self.nodes = [n for n in self.nodes if n.name != name] + [node]
        return node

    async def start_all(self, kv: Kv, sink_dsn: str) -> None:
        for i in range(1, 4):
            self.start(f"capture-{i}")
        async with asyncio.timeout(60):
            while True:
                if await owner_of(kv, self.keys) is not None:
                    break
                await asyncio.sleep(0.2)
            body = {"changefeed_id": CHANGEFEED, "sink_uri": sink_dsn}
            while True:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with (
                        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s,
                        s.post(f"{self.nodes[0].url}/api/v2/changefeeds", json=body) as r,
                    ):
                        if r.status == 200:
                            return
                        raise RuntimeError(f"changefeed create: {r.status} {await r.text()}")
                await asyncio.sleep(0.5)

    def by_name(self, name: str) -> CaptureNode:
        (node,) = [n for n in self.nodes if n.name == name]
        return node

    def kill_all(self) -> None:
        for node in self.nodes:
            if node.proc.poll() is None:
                node.proc.kill()
            node.proc.wait()


async def owner_of(kv: Kv, keys: Keys) -> str | None:
    leader = await current_leader(kv, keys.owner_prefix)
    return None if leader is None else leader.value.decode()


async def _claims(session: aiohttp.ClientSession, node: CaptureNode) -> bool:
    try:
        async with session.get(f"{node.url}/api/v2/status") as r:
            data: dict[str, Any] = await r.json()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return False  # down, frozen or starting
    return bool(data.get("is_owner"))


@dataclass
class OwnerWatch:
    captures: Captures
    kv: Kv
    interval: float = 0.2
    samples: int = 0
    overlaps: list[str] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)  # each owner in turn, as etcd named them

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=_HTTP) as session:
            while True:
                await asyncio.sleep(self.interval)
                try:
                    async with asyncio.timeout(2.0):
                        elected = await owner_of(self.kv, self.captures.keys)
                except Exception:  # etcd member down: the next sample
                    continue
                nodes = list(self.captures.nodes)
                claims = await asyncio.gather(*(_claims(session, n) for n in nodes))
                claimed = sorted(n.name for n, c in zip(nodes, claims, strict=True) if c)
                try:
                    async with asyncio.timeout(2.0):
                        after = await owner_of(self.kv, self.captures.keys)
                except Exception:
                    continue
                self.samples += 1
                for name in (elected, after):
                    if name is not None and (not self.owners or self.owners[-1] != name):
                        self.owners.append(name)
                # the owner may change while the captures answer: either reading of etcd will do
                named = {elected, after} - {None}
                if len(claimed) > 1 or (claimed and named and claimed[0] not in named):
                    self.overlaps.append(f"etcd names {sorted(named)}, claiming: {claimed}")
