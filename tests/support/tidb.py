"""A real tidb-server: writing its binlogs through our pumps (and the pipeline around it), or
as a downstream with binlog off (``running_tidb``).

``tidb-server`` is TiDB's own binary (tests/go/tidbserver, built by ``make deps``; looked up
here, never built). It runs standalone on its embedded store (``store = "unistore"``), whose
``path`` is no data directory: TiDB's binlog client parses the same ``path`` as its PD
endpoints, so it is our TSO's address (binlog-tso answers PD's protocol for the cluster ID and
relays etcd's API, where TiDB's pump client lists and watches our pumps). TiDB sets its binlog
client up before it opens its store: the pumps are online in etcd before TiDB starts, else it
exits with "no pump found". Its timestamps come from its own oracle (the machine's clock, as our
TSO's), not from our TSO.

``running_tidb`` starts one with binlog off, its embedded store's data in a directory of its
own (the drainer's ``db-type = "tidb"`` target, a changefeed's ``tidb://``), optionally with
``[performance]`` limits lowered (``txn-total-size-limit``, ``txn-entry-size-limit``).

``running_tidb_pipeline`` starts, in this order: etcd, two pumps (processes: a test may SIGKILL
one and start it again at its address), a binlog-tso, tidb-server, a MariaDB downstream and a
drainer reading DDL jobs from TiDB's status API (``syncer.ddl-history``); with
``tidb_downstream`` the downstream is a second tidb-server (binlog off) and the drainer's
drainer.toml says ``db-type = "tidb"`` with ``[syncer.to]``. Everything is a child
process, so the context manager is synchronous and a module-scoped fixture can share it between
tests; every process is stopped (killed when it does not stop in time) on exit.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncmy
import asyncmy.errors

from tests.support.etcd import EtcdProcess, run_etcd
from tests.support.gotools import go_tool
from tests.support.net import free_port
from tests.support.pipeline import caught_up
from tests.support.procs import stop_process
from tests.support.pump import PumpProcess, start_pump_process
from tests.support.stubs import pump_stub
from tests.support.tso import members_up, tso_process
from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.wire.binlog import Binlog, Pos, PullBinlogReq

if TYPE_CHECKING:
    # imported where used: a test module registers tests.support.mariadb as a pytest plugin,
    # which must be imported first so that pytest can rewrite its asserts
    from tests.support.mariadb import MariaDBServer

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0  # seconds tidb-server gets to bootstrap and answer on both ports
STOP_TIMEOUT = 20.0

# A prewrite a SIGKILLed pump stored without answering is written again to the other pump by
# TiDB's client, and its commit goes there: in a TiDB cluster the first pump learns from TiKV
# that the transaction is settled; here it gives the prewrite up after 20 s.
PUMP_ENV = {
    "PUMP_STORAGE_STUCK_PREWRITE_ACTION": "rollback",
    "PUMP_STORAGE_MAX_TXN_TIMEOUT": "20s",
}


def tidb_config(
    base: Path,
    port: int,
    status_port: int,
    *,
    pd_addr: str | None = None,
    performance: Mapping[str, int] | None = None,
    in_memory: bool = False,
) -> str:
    """tidb-server's TOML: the embedded store, files under ``base``. With ``pd_addr`` (a bare
    ``host:port`` of a PD endpoint) binlog is on (range strategy) into the pumps it lists, and
    ``path`` is that endpoint; without it binlog is off and the store keeps its data in
    ``base/data``, or in memory with ``in_memory``. (The store opens ``unistore://<path>`` and
    keeps its data in that URL's path: none for a ``host:port`` or a bare name, so a binlog-on
    server's store is in memory.) ``performance``: extra ``[performance]`` keys, such as
    ``txn-total-size-limit`` or ``txn-entry-size-limit`` (bytes)."""
    if pd_addr is not None:
        path = pd_addr
    else:
        path = "memory" if in_memory else str(base / "data")
    extra = "".join(f"{key} = {value}\n" for key, value in (performance or {}).items())
    binlog = (
        """
[binlog]
enable = true
strategy = "range"
write-timeout = "15s"
ignore-error = false
"""
        if pd_addr is not None
        else ""
    )
    return f"""\
store = "unistore"
path = "{path}"
host = "127.0.0.1"
port = {port}
socket = "{base / "tidb.sock"}"
temp-dir = "{base / "tmp"}"
tmp-storage-path = "{base / "tmp-storage"}"

[log]
level = "info"

[log.file]
filename = "{base / "tidb.log"}"

[status]
status-host = "127.0.0.1"
status-port = {status_port}
report-status = true

[performance]
run-auto-analyze = false
{extra}{binlog}"""


@dataclass
class TidbServer:
    """One tidb-server process on loopback ports; ``start`` waits until it serves SQL.

    With ``pd_addr`` it writes binlogs into the pumps that PD endpoint lists (an upstream);
    without, binlog is off (a downstream). ``performance``: extra ``[performance]`` keys."""

    base: Path
    pd_addr: str | None = None
    performance: Mapping[str, int] = field(default_factory=dict)
    in_memory: bool = False  # binlog off: the store in memory, not in base/data
    port: int = field(default_factory=free_port)
    status_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    startup_seconds: float = 0.0
    host: str = "127.0.0.1"
    user: str = "root"
    password: str = ""

    @property
    def status_url(self) -> str:
        return f"http://127.0.0.1:{self.status_port}"

    @property
    def log_path(self) -> Path:
        return self.base / "tidb.log"

    def dsn(self, database: str = "") -> str:
        return f"mysql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def start(self) -> float:
        """Start tidb-server and wait until it answers SQL; the seconds it took."""
        began = time.monotonic()
        self.base.mkdir(parents=True, exist_ok=True)
        config = self.base / "tidb.toml"
        config.write_text(
            tidb_config(
                self.base,
                self.port,
                self.status_port,
                pd_addr=self.pd_addr,
                performance=self.performance,
                in_memory=self.in_memory,
            )
        )
        with open(self.base / "tidb.out", "ab") as out:
            self.proc = subprocess.Popen(
                [str(go_tool("tidbserver")), f"--config={config}"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.base,
            )
        self._wait_ready()
        self.startup_seconds = time.monotonic() - began
        return self.startup_seconds

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"tidb-server exited with {self.proc.returncode}: {self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.status_url}/status", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.kill()
        raise TimeoutError(f"tidb-server not ready in {START_TIMEOUT:.0f} s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        text = ""
        for path in (self.base / "tidb.out", self.log_path):
            try:
                text += path.read_text(errors="replace")[-chars:]
            except OSError:
                pass
        return text or "(no log)"

    @asynccontextmanager
    async def connect(self, database: str | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        """An ``asyncmy`` connection as root (autocommit on unless told otherwise)."""
        kwargs.setdefault("autocommit", True)
        conn = await asyncmy.connect(
            host="127.0.0.1", port=self.port, user="root", password="", database=database, **kwargs
        )
        try:
            yield conn
        finally:
            conn.close()

    async def current_ts(self) -> int:
        """A timestamp of TiDB's oracle taken now: every transaction committed before it has a
        smaller commit ts."""
        async with self.connect(autocommit=False) as conn, conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute("SELECT @@tidb_current_ts")
            (ts,) = await cur.fetchone()
            await cur.execute("ROLLBACK")
        return int(ts)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, STOP_TIMEOUT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def running_tidb(
    base: Path, performance: Mapping[str, int] | None = None, *, in_memory: bool = False
) -> Iterator[TidbServer]:
    """A standalone tidb-server with binlog off (a downstream), its data under ``base`` (or in
    memory); stopped on exit. ``performance``: extra ``[performance]`` keys (``tidb_config``)."""
    tidb = TidbServer(base, performance=dict(performance or {}), in_memory=in_memory)
    try:
        tidb.start()
        yield tidb
    finally:
        tidb.stop()


@dataclass
class DrainerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc.poll() is None


def start_drainer(
    data_dir: Path,
    etcd_url: str,
    ddl_history: str,
    *,
    sink_uri: str | None = None,
    config: Path | None = None,
) -> DrainerProcess:
    """A drainer process reading DDL jobs from ``ddl_history`` (TiDB's status URL), writing
    to ``sink_uri`` or where its drainer.toml ``config`` says; ready."""
    port = free_port()
    log_path = data_dir.parent / f"{data_dir.name}.log"
    argv = [
        sys.executable,
        *("-m", "services.drainer"),
        *("--addr", f"127.0.0.1:{port}", "--data-dir", str(data_dir)),
        *("--pd-urls", etcd_url, "--node-id", "drainer"),
        *("--syncer-ddl-history", ddl_history),
        *(("--syncer-sink-uri", sink_uri) if sink_uri is not None else ()),
        *((f"--config={config}",) if config is not None else ()),
    ]
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    drainer = DrainerProcess(proc, port, log_path)
    _wait_http(proc, f"{drainer.http}/ready", log_path)
    return drainer


def tidb_drainer_toml(path: Path, tidb: TidbServer) -> Path:
    """A drainer.toml writing to ``tidb`` as tidb-binlog's users name a TiDB downstream:
    ``db-type = "tidb"`` and ``[syncer.to]``; its path."""
    path.write_text(
        f"""\
[syncer]
db-type = "tidb"

[syncer.to]
host = "{tidb.host}"
user = "{tidb.user}"
password = "{tidb.password}"
port = {tidb.port}
"""
    )
    return path


def _wait_http(proc: subprocess.Popen[bytes], url: str, log_path: Path, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready within {within:.0f} s: {log_path.read_text()[-3000:]}")


@dataclass
class TidbPipeline:
    root: Path
    etcd: EtcdProcess
    cluster_id: int
    pumps: list[PumpProcess]
    tso_url: str
    tidb: TidbServer
    downstream: MariaDBServer | TidbServer
    drainer: DrainerProcess

    def pump_name(self, index: int) -> str:
        return f"pump-{index + 1}"

    def kill_pump(self, index: int) -> None:
        """SIGKILL pump ``index`` (its record stays online in etcd)."""
        self.pumps[index].kill()

    def restart_pump(self, index: int) -> PumpProcess:
        """Start pump ``index`` again with its data, node id and ports."""
        old = self.pumps[index]
        self.pumps[index] = _start_pump(
            self.root, index, self.etcd.endpoint, old.grpc_port, old.http_port
        )
        return self.pumps[index]

    async def commits(self, index: int, after: int, within: float = 60.0) -> AsyncIterator[Binlog]:
        """The commit binlogs pump ``index`` serves after commit ts ``after`` (fake ones left
        out), as a drainer pulls them, until ``within`` seconds have passed."""
        async with pump_stub(self.pumps[index].addr) as stub:
            req = PullBinlogReq(cluster_id=self.cluster_id, start_from=Pos(offset=after))
            async for resp in stub.pull_binlogs(req, timeout=within):
                binlog = Binlog().parse(resp.entity.payload)
                if binlog.start_ts != binlog.commit_ts:
                    yield binlog

    async def prewritten_to(self, index: int, since: int, within: float = 60.0) -> None:
        """Wait until pump ``index`` has a transaction TiDB started after ``since``: TiDB's
        pump client writes prewrites to it (again)."""
        async for binlog in self.commits(index, since, within):
            if binlog.start_ts > since:
                return

    async def caught_up(self, within: float = 90.0) -> int:
        """Wait until the downstream holds every transaction TiDB committed so far; that ts.
        A drainer that exits fails the wait at once, with the end of its log."""
        ts = await self.tidb.current_ts()
        d = self.downstream
        waiting = asyncio.create_task(
            caught_up(d.host, d.port, d.user, d.password, ts, within=within), name="caught-up"
        )
        while not waiting.done():
            if not self.drainer.running:
                waiting.cancel()
                await asyncio.gather(waiting, return_exceptions=True)
                tail = self.drainer.log_path.read_text(errors="replace")[-4000:]
                raise AssertionError(f"the drainer exited; its log ends:\n{tail}")
            await asyncio.wait({waiting}, timeout=0.5)
        await waiting
        return ts


def _start_pump(
    root: Path, index: int, etcd_url: str, grpc_port: int = 0, http_port: int = 0
) -> PumpProcess:
    name = f"pump-{index + 1}"
    saved = {k: os.environ.get(k) for k in PUMP_ENV}
    os.environ.update(PUMP_ENV)  # start_pump_process passes the environment on
    try:
        return start_pump_process(
            root / name,
            etcd_url,
            *("--node-id", name, "--gen-binlog-interval", "1"),
            grpc_port=grpc_port,
            http_port=http_port,
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def running_tidb_pipeline(
    root: Path,
    mariadb_template: Path | None,
    *,
    tidb_downstream: Mapping[str, int] | None = None,
) -> Iterator[TidbPipeline]:
    """etcd, two pumps, binlog-tso, tidb-server, a MariaDB downstream (from
    ``mariadb_template``) and a drainer (see the module's docstring); all stopped on exit.

    ``tidb_downstream``: the downstream is a second tidb-server instead (binlog off), with
    these ``[performance]`` keys (``tidb_config``), and the drainer is told so by a drainer.toml
    with ``db-type = "tidb"`` and ``[syncer.to]``, as tidb-binlog's drainer is."""
    from tests.support.mariadb import running_server

    with ExitStack() as stack:
        etcd = stack.enter_context(run_etcd(root / "etcd"))
        pumps: list[PumpProcess] = []

        def stop_pumps() -> None:
            for p in pumps:
                if p.proc.poll() is None:
                    stop_process(p.proc, 30)

        stack.callback(stop_pumps)
        for i in range(2):
            pumps.append(_start_pump(root, i, etcd.endpoint))
        tso_url, _ = stack.enter_context(tso_process(etcd.endpoint, root / "tso.log"))
        cluster_id = asyncio.run(_cluster_id(etcd.endpoint, tso_url))
        tidb = TidbServer(root / "tidb", tso_url.removeprefix("http://"))
        stack.callback(tidb.stop)
        tidb.start()
        downstream: MariaDBServer | TidbServer
        if tidb_downstream is not None:
            downstream = stack.enter_context(running_tidb(root / "downstream", tidb_downstream))
            config = tidb_drainer_toml(root / "drainer.toml", downstream)
            drainer = start_drainer(root / "drainer", etcd.endpoint, tidb.status_url, config=config)
        else:
            assert mariadb_template is not None
            downstream = stack.enter_context(running_server(mariadb_template, root / "downstream"))
            sink_uri = f"{downstream.dsn()}?consistent=true"
            drainer = start_drainer(
                root / "drainer", etcd.endpoint, tidb.status_url, sink_uri=sink_uri
            )
        stack.callback(stop_process, drainer.proc, 30)
        yield TidbPipeline(root, etcd, cluster_id, pumps, tso_url, tidb, downstream, drainer)


async def _cluster_id(etcd_url: str, tso_url: str) -> int:
    """The cluster's ID once the binlog-tso leads or follows among the pumps' TSO members."""
    await members_up(tso_url, 3)
    async with EtcdKv.connect([etcd_url]) as kv:
        cluster_id = await read_cluster_id(kv)
    assert cluster_id is not None
    return cluster_id


# -- writers: concurrent DML through TiDB's MySQL port ------------------------------------

ENCODE_ROW_REFUSAL = "data and columnID count not match"
# What TiDB answers a transaction it gives up, and the test counts rather than fails on:
# 1105 EncodeRow (a DML racing ADD/DROP COLUMN), 8028 (the schema changed under the
# transaction), 9007 (an optimistic write conflict), 1213 (a deadlock).
REFUSED_CODES = {1105, 8028, 9007, 1213}


@dataclass
class WriteCounts:
    committed: int = 0
    refused: dict[int, int] = field(default_factory=dict)  # TiDB's error code -> count

    def refuse(self, code: int) -> None:
        self.refused[code] = self.refused.get(code, 0) + 1


def _refused(e: asyncmy.errors.MySQLError) -> int | None:
    code = e.args[0] if e.args and isinstance(e.args[0], int) else None
    if code == 1105 and ENCODE_ROW_REFUSAL not in str(e):
        return None  # another unknown error: not one TiDB is known to give
    return code if code in REFUSED_CODES else None


async def write_until(
    tidb: TidbServer, table: str, first_id: int, stop: asyncio.Event, counts: WriteCounts
) -> None:
    """Transactions on ``table`` (columns ``id``, ``k``, ``v``) with ids from ``first_id`` up,
    until ``stop``: each inserts two rows, updates one and deletes one of those written before,
    pessimistic and optimistic in turn. TiDB's refusals (``REFUSED_CODES``) roll the
    transaction back and are counted; any other error fails the writer."""
    rng = random.Random(first_id)
    next_id, live = first_id, list[int]()
    async with tidb.connect(autocommit=False) as conn, conn.cursor() as cur:
        while not stop.is_set():
            mode = "PESSIMISTIC" if counts.committed % 2 else "OPTIMISTIC"
            new = [next_id, next_id + 1]
            next_id += 2
            gone = None
            try:
                await cur.execute(f"BEGIN {mode}")
                await cur.executemany(
                    f"INSERT INTO {table} (id, k, v) VALUES (%s, %s, %s)",
                    [(i, i % 97, f"w{i}") for i in new],
                )
                if live:
                    i = rng.choice(live)
                    await cur.execute(
                        f"UPDATE {table} SET k = k + 1, v = CONCAT(v, '+') WHERE id = %s", (i,)
                    )
                gone = live.pop(rng.randrange(len(live))) if len(live) > 20 else None
                if gone is not None:
                    await cur.execute(f"DELETE FROM {table} WHERE id = %s", (gone,))
                await cur.execute("COMMIT")
            except asyncmy.errors.MySQLError as e:
                code = _refused(e)
                if code is None:
                    raise
                counts.refuse(code)
                await cur.execute("ROLLBACK")
                if gone is not None:
                    live.append(gone)
                continue
            counts.committed += 1
            live.extend(new)
