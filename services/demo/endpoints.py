"""Where the demo's data lives: the upstream the workload writes and the drainer's downstream.

Defaults are two SQLite files in the data dir (``sqlite://<data-dir>/upstream.db`` and
``sqlite://<data-dir>/downstream.db``). Each side may point at a MySQL/MariaDB server instead,
independently, through ``TRIBUTARY_DEMO_UPSTREAM`` / ``TRIBUTARY_DEMO_DOWNSTREAM`` =
``mysql://user:password@host:port`` (a server, not a database: the demo uses its own databases
``demo_bank`` and ``demo_mixed`` there, and drops them at start).

Invariant: what the drainer is given (``sink_url``: a MySQL downstream gets
``?consistent=true``, one downstream transaction per batch with its checkpoint) and what the
checker and the bank totals read (``downstream``, the plain URL) name the same database, and
both sides are never the same MySQL server (the drainer would write into the upstream's own
tables). Example: ``TRIBUTARY_DEMO_DOWNSTREAM=mysql://root:pw@127.0.0.1:3307`` gives
``downstream = "mysql://root:pw@127.0.0.1:3307"`` and
``sink_url = "mysql://root:pw@127.0.0.1:3307/?consistent=true"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from services.demo.errors import DemoError
from tributary.net import join_host_port
from tributary.sinks.urls import redact

UPSTREAM_ENV = "TRIBUTARY_DEMO_UPSTREAM"
DOWNSTREAM_ENV = "TRIBUTARY_DEMO_DOWNSTREAM"
BANK_DB = "demo_bank"
MIXED_DB = "demo_mixed"
DATABASES = (BANK_DB, MIXED_DB)


class UsageError(DemoError):
    """A setting the demo cannot use (the CLI exits with code 2)."""


@dataclass(frozen=True)
class Endpoints:
    upstream: str  # URL the workload writes and the checker reads
    downstream: str  # URL the checker and the bank total read

    @property
    def sink_url(self) -> str:
        """The drainer's ``--syncer-sink-uri``."""
        if is_mysql(self.downstream):
            return f"{self.downstream}/?consistent=true"
        return self.downstream

    def shown(self, side: str) -> str:
        """``side`` ("upstream" or "downstream") for the screen: the password masked."""
        return redact(self.upstream if side == "upstream" else self.downstream)

    def sqlite_path(self, side: str) -> Path | None:
        url = self.upstream if side == "upstream" else self.downstream
        return None if is_mysql(url) else Path(url.removeprefix("sqlite://"))


def is_mysql(url: str) -> bool:
    return url.startswith("mysql://")


def endpoints_from(env: Mapping[str, str], data_dir: Path) -> Endpoints:
    """The demo's two sides: from ``env`` where set, else files in ``data_dir`` (absolute)."""
    up = _server(env, UPSTREAM_ENV) or f"sqlite://{data_dir / 'upstream.db'}"
    down = _server(env, DOWNSTREAM_ENV) or f"sqlite://{data_dir / 'downstream.db'}"
    if is_mysql(up) and is_mysql(down) and _address(up) == _address(down):
        raise UsageError(
            f"{UPSTREAM_ENV} and {DOWNSTREAM_ENV} name the same server ({_address(up)}); "
            "the downstream must be another one"
        )
    return Endpoints(up, down)


def _server(env: Mapping[str, str], name: str) -> str | None:
    """``env[name]`` as ``mysql://user:pw@host:port`` (no trailing slash), or None if unset."""
    value = env.get(name, "").strip()
    if not value:
        return None
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError as e:
        raise UsageError(f"{name}: bad port in {redact(value)!r}") from e
    if parts.scheme != "mysql" or not parts.hostname:
        raise UsageError(
            f"{name} must look like mysql://user:password@host:port, not {redact(value)!r}"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(
            f"{name} names a server only (mysql://user:password@host:port): the demo uses "
            f"its own databases {' and '.join(DATABASES)}, so leave out {parts.path}"
            f"{'?' + parts.query if parts.query else ''}"
        )
    userinfo = parts.netloc.rpartition("@")[0]
    hostport = join_host_port(parts.hostname, port or 3306)
    return f"mysql://{userinfo}@{hostport}" if userinfo else f"mysql://{hostport}"


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.port or 3306)
