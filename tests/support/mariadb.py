"""Real MariaDB servers for tests: Debian's mariadb-server, private instances on loopback.

``make deps`` installs the package (scripts/deps); a test asking for MariaDB on a machine without
it fails at once with "mariadb-server is missing: run `make deps`", never a skip.

Each instance is a ``mariadbd`` run as root with ``--no-defaults`` on a free port of 127.0.0.1
(or of the address given as ``host``, e.g. the one-node cluster's bridge so that pods reach it), its
own data directory and socket, ROW binlog on and a distinct ``server_id``. The system tables are
made once per session by ``mariadb-install-db`` into a template directory that every instance
copies (a copy is much faster than a fresh install). A user with a password (``tributary``) is
created by an ``--init-file`` on every start, so instances are reachable only over TCP with it.

Fixtures (register the plugin with ``pytest_plugins = ["tests.support.mariadb"]`` in the root
conftest or in a test module; such a module imports names from here only under TYPE_CHECKING,
so that pytest imports the plugin first and can rewrite its asserts):

* ``mariadb_server`` (session): one shared server; don't kill it, use ``mariadb_instance``.
* ``mariadb`` (function): a fresh database on the shared server, dropped afterwards.
* ``mariadb_pair`` (function): two fresh servers, upstream and downstream, for end-to-end tests.
* ``mariadb_instance`` (function): a factory starting further fresh servers owned by the test.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncmy
import pytest

from tests.support.components import ComponentMissing, component
from tests.support.net import free_port
from tests.support.procs import stop_process

USER = "tributary"
PASSWORD = "tributary-pw"
START_TIMEOUT = 60.0
_SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# A 16 MB redo log rather than MariaDB's 96 MB: every server is a copy of the template, a run
# starts a few hundred of them, and a test writes little. The benchmarks ask for the default
# back (``BENCH_ARGS``); a server started with another size resizes its log once.
REDO_LOG = "--innodb-log-file-size=16M"
BENCH_ARGS = ("--innodb-log-file-size=96M",)

# Tuned for tests, not for durability against power loss: a killed mariadbd loses nothing
# (the OS still has the writes), which is the fault the tests inject.
SERVER_ARGS = (
    REDO_LOG,
    "--binlog-format=ROW",
    "--innodb-flush-log-at-trx-commit=2",
    "--sync-binlog=0",
    "--innodb-buffer-pool-size=128M",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_bin",
    "--default-time-zone=+00:00",
    "--skip-name-resolve",
    "--max-connections=500",
)


class MariaDBUnavailable(RuntimeError):
    """MariaDB is missing or could not start; the message carries the reason."""


def _binary(name: str) -> str | None:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:{_SBIN_PATH}")


def ensure_installed() -> None:
    """``mariadbd`` is there (``make deps`` installs Debian's mariadb-server), or fail at once."""
    try:
        component("mariadb-server")
    except ComponentMissing as e:
        raise MariaDBUnavailable(str(e)) from None


def make_template(directory: Path) -> Path:
    """A data directory with the system tables (``mariadb-install-db``), to copy per instance."""
    ensure_installed()
    install_db = _binary("mariadb-install-db")
    if install_db is None:
        raise MariaDBUnavailable("mariadb-install-db not found")
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            install_db,
            "--no-defaults",
            f"--datadir={directory}",
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            REDO_LOG,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{_SBIN_PATH}"},
    )
    if done.returncode != 0:
        raise MariaDBUnavailable(
            f"mariadb-install-db failed: {(done.stdout + done.stderr)[-4000:]}"
        )
    return directory


_server_ids = itertools.count(1)


@dataclass
class MariaDBServer:
    """One ``mariadbd`` process; ``start``/``stop``/``kill`` keep the data directory and port."""

    base: Path
    port: int
    server_id: int
    extra_args: Sequence[str] = ()
    host: str = "127.0.0.1"
    user: str = USER
    password: str = PASSWORD
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    startup_seconds: float = 0.0

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def socket(self) -> Path:
        return self.base / "mysql.sock"

    @property
    def error_log(self) -> Path:
        return self.base / "error.log"

    def dsn(self, database: str = "") -> str:
        """``mysql://user:password@host:port/database``: the form sink URLs take."""
        return f"mysql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def start(self) -> float:
        """Start the server and wait until the test user can log in; returns seconds taken."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("server already running")
        began = time.monotonic()
        init = self.base / "init.sql"
        init.write_text(
            f"CREATE USER IF NOT EXISTS '{self.user}'@'%' IDENTIFIED BY '{self.password}';\n"
            f"GRANT ALL PRIVILEGES ON *.* TO '{self.user}'@'%' WITH GRANT OPTION;\n"
        )
        mariadbd = _binary("mariadbd")
        if mariadbd is None:
            raise MariaDBUnavailable("mariadbd not found")
        cmd = [
            mariadbd,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--socket={self.socket}",
            f"--pid-file={self.base / 'mariadbd.pid'}",
            f"--log-error={self.error_log}",
            f"--log-bin={self.base / 'binlog' / 'mysql-bin'}",
            f"--tmpdir={self.base / 'tmp'}",  # its own: /tmp is shared with everything else
            f"--server-id={self.server_id}",
            f"--init-file={init}",
            "--user=root",
            *SERVER_ARGS,
            *self.extra_args,
        ]
        (self.base / "binlog").mkdir(exist_ok=True)
        (self.base / "tmp").mkdir(exist_ok=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()
        self.startup_seconds = time.monotonic() - began
        return self.startup_seconds

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise MariaDBUnavailable(
                    f"mariadbd exited with {self.proc.returncode}: {self._log_tail()}"
                )
            if self._client("SELECT 1", check=False).returncode == 0:
                return
            time.sleep(0.05)
        self.kill()
        raise MariaDBUnavailable(f"mariadbd not ready in {START_TIMEOUT} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.error_log.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no error log)"

    def _client(self, sql: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        client = _binary("mariadb") or "mariadb"
        done = subprocess.run(
            [
                client,
                "--no-defaults",
                "--protocol=TCP",
                f"--host={self.host}",
                f"--port={self.port}",
                f"--user={self.user}",
                f"--password={self.password}",
                "--batch",
                "--skip-column-names",
                "--connect-timeout=2",
                "-e",
                sql,
            ],
            capture_output=True,
            text=True,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"mariadb client failed on {sql!r}: {done.stderr.strip()}")
        return done

    def admin(self, sql: str) -> list[list[str]]:
        """Run SQL through the ``mariadb`` client (no event loop needed); rows as text cells."""
        out = self._client(sql).stdout
        return [line.split("\t") for line in out.splitlines()]

    @asynccontextmanager
    async def connect(self, database: str | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        """An ``asyncmy`` connection (autocommit on) as the test user."""
        conn = await asyncmy.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=database,
            autocommit=True,
            **kwargs,
        )
        try:
            yield conn
        finally:
            conn.close()

    async def execute(
        self, sql: str, args: Sequence[Any] | None = None, database: str | None = None
    ) -> int:
        """Run one statement; the affected row count."""
        async with self.connect(database) as conn, conn.cursor() as cur:
            return int(await cur.execute(sql, args))

    async def query(
        self, sql: str, args: Sequence[Any] | None = None, database: str | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one query; all rows as tuples of driver values."""
        async with self.connect(database) as conn, conn.cursor() as cur:
            await cur.execute(sql, args)
            return [tuple(row) for row in await cur.fetchall()]

    def stop(self, timeout: float = 60.0) -> None:
        """Clean shutdown (SIGTERM) and wait."""
        if self.proc is not None:
            stop_process(self.proc, timeout, self.kill)

    def kill(self) -> None:
        """SIGKILL the server (the data directory stays; ``start`` recovers it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def new_server(
    template: Path, base: Path, extra_args: Sequence[str] = (), host: str = "127.0.0.1"
) -> MariaDBServer:
    """A server whose data directory is a copy of ``template`` (not started), bound to ``host``
    (the address clients use too; its user may log in from anywhere)."""
    base.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, base / "data")
    return MariaDBServer(base, free_port(), next(_server_ids), tuple(extra_args), host)


@contextmanager
def running_server(
    template: Path, base: Path, extra_args: Sequence[str] = (), host: str = "127.0.0.1"
) -> Iterator[MariaDBServer]:
    """Start a fresh server; stop it on exit (killed if a clean stop takes too long)."""
    server = new_server(template, base, extra_args, host)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class MariaDBDatabase:
    """A database of its own on a (shared) server: what the ``mariadb`` fixture gives a test."""

    server: MariaDBServer
    name: str

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def user(self) -> str:
        return self.server.user

    @property
    def password(self) -> str:
        return self.server.password

    def dsn(self) -> str:
        return self.server.dsn(self.name)

    def connect(self, **kwargs: Any) -> AbstractAsyncContextManager[Any]:
        return self.server.connect(self.name, **kwargs)

    async def execute(self, sql: str, args: Sequence[Any] | None = None) -> int:
        return await self.server.execute(sql, args, self.name)

    async def query(self, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return await self.server.query(sql, args, self.name)


InstanceFactory = Callable[..., MariaDBServer]


@dataclass(frozen=True)
class MariaDBPair:
    upstream: MariaDBServer
    downstream: MariaDBServer


@pytest.fixture(scope="session")
def mariadb_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """System tables made once per session; instances copy them."""
    return make_template(tmp_path_factory.mktemp("mariadb-template") / "data")


@pytest.fixture(scope="session")
def mariadb_server(
    mariadb_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MariaDBServer]:
    """One server shared by the session (tests get their own database through ``mariadb``)."""
    with running_server(mariadb_template, tmp_path_factory.mktemp("mariadb-shared")) as server:
        yield server


_databases = itertools.count(1)


@pytest.fixture
def mariadb(mariadb_server: MariaDBServer) -> Iterator[MariaDBDatabase]:
    """A fresh, empty database on the shared server; dropped after the test."""
    if not mariadb_server.running:
        raise RuntimeError("the shared MariaDB server is down: a test must not stop it")
    name = f"t{os.getpid()}_{next(_databases)}"
    mariadb_server.admin(f"CREATE DATABASE `{name}`")
    try:
        yield MariaDBDatabase(mariadb_server, name)
    finally:
        mariadb_server.admin(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def mariadb_instance(mariadb_template: Path, tmp_path: Path) -> Iterator[InstanceFactory]:
    """``mariadb_instance(name, *extra_args, host=...)`` starts a fresh server owned by the test
    (on 127.0.0.1 unless ``host`` names another local address to bind)."""
    servers: list[MariaDBServer] = []

    def start(name: str = "db", *extra_args: str, host: str = "127.0.0.1") -> MariaDBServer:
        server = new_server(mariadb_template, tmp_path / f"mariadb-{name}", extra_args, host)
        servers.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def mariadb_pair(mariadb_instance: InstanceFactory) -> MariaDBPair:
    """Two fresh servers, upstream and downstream (each may be stopped, killed, restarted)."""
    return MariaDBPair(mariadb_instance("upstream"), mariadb_instance("downstream"))
