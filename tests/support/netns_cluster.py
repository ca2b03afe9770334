"""etcd, pumps and a drainer, each in a network namespace of its own, for partition tests.

``netns_cluster(root)`` builds a :class:`~tests.support.netns.Net` and starts real processes in
it: etcd (``etcd`` namespace, client port 2379), pumps ``pump-1`` ... (port 8250, an embedded
TSO member each), and, when asked, a drainer (port 8249) into a SQLite file under ``root``.
Every process listens on its namespace's address (tidb-binlog's ports: each namespace has its
own port space), so a cut between two namespaces cuts exactly that link. The test process stays
in the root namespace and reaches everything through the bridge.

The pumps run with a short heartbeat and ``registration-timeout`` so a pump cut from etcd stops
taking prewrites within seconds, not the default ten.

Invariant: on exit every child is stopped (SIGTERM, then SIGKILL) and the net torn down, which
kills anything left in a namespace; nothing survives a failed test.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from services.demo.cluster import etcd_binary
from services.demo.procs import Child, Supervisor
from tests.support.netns import Net, Node, private_net
from tests.support.pipeline import DB, ORDERS, row
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.ddlhistory import Action, KvDdlHistory
from tributary.ddlhistory.build import ddl_job
from tributary.pumpclient import PumpsClient
from tributary.sinks.checkpoint import CheckpointRecord
from tributary.tso.client import TsoClient

ETCD_PORT = 2379
PUMP_PORT = 8250
DRAINER_PORT = 8249
START_TIMEOUT = 60.0
REPO = Path(__file__).resolve().parents[2]

# a pump cut from etcd refuses prewrites within about this many seconds
PUMP_FLAGS = ("--heartbeat-interval", "1", "--registration-timeout", "4")


@dataclass
class Proc:
    node: Node
    child: Child

    @property
    def name(self) -> str:
        return self.node.name


@dataclass
class NetCluster:
    net: Net
    root: Path
    supervisor: Supervisor
    etcd: Proc | None = None
    pumps: list[Proc] = field(default_factory=list)
    drainer: Proc | None = None
    _http: aiohttp.ClientSession | None = None

    @property
    def etcd_url(self) -> str:
        assert self.etcd is not None
        return self.etcd.node.url(ETCD_PORT)

    @property
    def downstream(self) -> Path:
        return self.root / "downstream.db"

    def pump(self, name: str) -> Proc:
        return next(p for p in self.pumps if p.name == name)

    def _start(self, node: Node, argv: list[str]) -> Child:
        return self.supervisor.start(
            node.name, self.net.argv(node, argv), self.root / f"{node.name}.log"
        )

    async def start_etcd(self) -> Proc:
        node = self.net.add("etcd")
        c, p = node.url(ETCD_PORT), node.url(ETCD_PORT + 1)
        argv = [
            etcd_binary(),
            *("--name", "etcd", "--data-dir", str(self.root / "etcd")),
            *("--listen-client-urls", c, "--advertise-client-urls", c),
            *("--listen-peer-urls", p, "--initial-advertise-peer-urls", p),
            *("--initial-cluster", f"etcd={p}", "--log-level", "warn"),
        ]
        self.etcd = Proc(node, self._start(node, argv))
        await self.wait_ready(self.etcd, f"{c}/health")
        return self.etcd

    async def start_pumps(self, count: int) -> list[Proc]:
        started = []
        for i in range(len(self.pumps) + 1, len(self.pumps) + count + 1):
            node = self.net.add(f"pump-{i}")
            argv = [
                sys.executable,
                *("-m", "services.pump", "--addr", node.addr(PUMP_PORT)),
                *("--data-dir", str(self.root / node.name), "--pd-urls", self.etcd_url),
                *("--node-id", node.name, "--gen-binlog-interval", "1"),
                *("--storage-stop-write-at-available-space", "64MiB", *PUMP_FLAGS),
            ]
            started.append(Proc(node, self._start(node, argv)))
        self.pumps += started
        await asyncio.gather(
            *(self.wait_ready(p, f"{p.node.url(PUMP_PORT)}/ready") for p in started)
        )
        return started

    async def start_drainer(self) -> Proc:
        node = self.net.add("drainer")
        argv = [
            sys.executable,
            *("-m", "services.drainer", "--addr", node.addr(DRAINER_PORT)),
            *("--data-dir", str(self.root / "drainer"), "--pd-urls", self.etcd_url),
            *("--node-id", "drainer", "--syncer-sink-uri", f"sqlite://{self.downstream}"),
        ]
        self.drainer = Proc(node, self._start(node, argv))
        await self.wait_ready(self.drainer, f"{node.url(DRAINER_PORT)}/ready")
        return self.drainer

    async def wait_ready(self, proc: Proc, url: str) -> None:
        assert self._http is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            proc.child.check_alive()
            try:
                async with self._http.get(url) as resp:
                    if resp.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.1)
        raise AssertionError(f"{proc.name} not ready within {START_TIMEOUT:.0f} s; see its log")

    async def http_status(self, url: str) -> int:
        """The status code of a GET of ``url`` (e.g. a pump's ``/ready``)."""
        assert self._http is not None
        async with self._http.get(url) as resp:
            return resp.status

    async def stop(self) -> None:
        groups = [
            [self.drainer] if self.drainer else [],
            self.pumps,
            [self.etcd] if self.etcd else [],
        ]
        for group in groups:
            await asyncio.gather(*(p.child.stop(20.0) for p in group if p is not None))


@asynccontextmanager
async def netns_cluster(root: Path) -> AsyncIterator[NetCluster]:
    """An empty cluster on a private net (start etcd, pumps, drainer on it); all gone on exit."""
    supervisor = Supervisor(root)
    with private_net() as net:
        cluster = NetCluster(net, root, supervisor)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
                cluster._http = http
                try:
                    yield cluster
                finally:
                    net.heal_all()
                    await cluster.stop()
        finally:
            supervisor.kill_all()


@dataclass
class Clients:
    """What a writer needs, opened from the root namespace through the bridge."""

    kv: EtcdKv
    cluster_id: int
    tso: TsoClient
    pumps: PumpsClient
    history: KvDdlHistory


@asynccontextmanager
async def clients(cluster: NetCluster) -> AsyncIterator[Clients]:
    async with EtcdKv.connect([cluster.etcd_url]) as kv:
        cluster_id = await read_cluster_id(kv)
        assert cluster_id is not None
        async with (
            TsoClient(kv, cluster_id) as tso,
            PumpsClient(kv, cluster_id, write_timeout=30.0, commit_timeout=120.0) as pumps,
        ):
            yield Clients(kv, cluster_id, tso, pumps, KvDdlHistory(kv))


async def _ddl(c: Clients, job_id: int, action: Action, table: object, query: str) -> int:
    job = await c.history.append_job(
        lambda v: ddl_job(job_id, action, v, DB, table, query)  # type: ignore[arg-type]
    )
    start = await c.tso.get_ts()
    await c.pumps.prewrite(start, b"", b"ddl", ddl_query=query.encode(), ddl_job_id=job_id)
    await c.pumps.commit(start, await c.tso.get_ts())
    return job.schema_version


async def create_orders(c: Clients) -> int:
    """``shop.orders`` created through the pumps; the schema version its rows must carry."""
    await _ddl(c, 1, Action.CREATE_SCHEMA, None, "CREATE DATABASE shop")
    query = "CREATE TABLE orders (id BIGINT PRIMARY KEY)"
    return await _ddl(c, 2, Action.CREATE_TABLE, ORDERS, query)


async def insert(c: Clients, version: int, rid: int) -> int | None:
    """One transaction inserting ``rid``; its commit ts once acknowledged, None if the prewrite
    failed (then it is rolled back and must not reach the downstream)."""
    start = await c.tso.get_ts()
    try:
        await c.pumps.prewrite(start, row(ORDERS.id, version, rid), b"k%d" % rid)
    except Exception:
        await c.pumps.rollback(start)
        return None
    commit_ts = await c.tso.get_ts()
    await c.pumps.commit(start, commit_ts)
    return commit_ts


def downstream_ids(db: Path) -> set[int]:
    """The ids in the SQLite downstream's ``shop.orders`` (empty before the table exists)."""
    if not db.exists():
        return set()
    with sqlite3.connect(db, timeout=10) as conn:
        try:
            return {r[0] for r in conn.execute('SELECT id FROM "shop__orders"')}
        except sqlite3.OperationalError:
            return set()


def downstream_checkpoint(db: Path) -> int | None:
    if not db.exists():
        return None
    with sqlite3.connect(db, timeout=10) as conn:
        try:
            rows = conn.execute('SELECT checkPoint FROM "tidb_binlog__checkpoint"').fetchall()
        except sqlite3.OperationalError:
            return None
    return max((CheckpointRecord.from_json(r[0]).commit_ts for r in rows), default=None)


async def caught_up(db: Path, ts: int, within: float = 90.0) -> None:
    """Wait until the downstream checkpoint reaches ``ts``."""
    deadline = time.monotonic() + within
    last = None
    while time.monotonic() < deadline:
        last = downstream_checkpoint(db)
        if last is not None and last >= ts:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"downstream checkpoint {last} did not reach {ts} within {within:.0f} s")


def missing(expected: Iterable[int], db: Path) -> set[int]:
    return set(expected) - downstream_ids(db)
