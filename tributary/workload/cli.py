"""``binlog-workload``: run a bank or mixed workload against an upstream and a pump cluster.

Flags: ``--kind bank|mixed --upstream mysql://user:pw@host:port | sqlite:///path --pd-urls
http://etcd:2379 --duration 30 --writers 8 [--rate N] [--txns N] [--seed S] [--database D]
[--accounts N] [--ddl-ratio F] [--ssl-ca F --ssl-cert F --ssl-key F]``. The cluster ID is read
from etcd (the pumps store it), the TSO and the pumps are found there too, DDL jobs go to the
DDL history in the same etcd. With ``--ssl-*`` the pumps and the TSO are reached over TLS
(mutual with a certificate; the chain is checked, not the host name, as the pumps' own clients
do), and rotated files apply to the next connection. SIGINT/SIGTERM stop the writers between
transactions. The counters are printed as one JSON line on stdout at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import ssl
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from tributary.coord.cluster_id import read_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.ddlhistory import KvDdlHistory
from tributary.pumpclient import PumpsClient
from tributary.settings.security import SecuritySettings
from tributary.telemetry.logs import configure_logging
from tributary.telemetry.tls import client_context
from tributary.tso.client import TsoClient
from tributary.version import add_version_flag
from tributary.workload.mixed import MixedOptions
from tributary.workload.runner import KINDS, make_workload, run_workload
from tributary.workload.stats import WorkloadStats
from tributary.workload.upstream import open_upstream

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    kind: str
    upstream: str
    pd_urls: tuple[str, ...]
    duration: float | None
    txns: int | None
    writers: int
    rate: float | None
    seed: int | None
    database: str | None
    accounts: int
    ddl_ratio: float
    log_level: str
    security: SecuritySettings = field(default_factory=SecuritySettings)


def parse_args(argv: Sequence[str] | None = None) -> Options:
    p = argparse.ArgumentParser(
        prog="binlog-workload",
        description="Run a bank or mixed workload against an upstream and a pump cluster.",
    )
    p.add_argument("--kind", choices=KINDS, default="bank")
    p.add_argument("--upstream", required=True, help="mysql://user:pw@host:port or sqlite:///path")
    p.add_argument("--pd-urls", default="http://127.0.0.1:2379", help="comma-separated etcd URLs")
    p.add_argument("--duration", type=float, help="seconds to run (default 30 without --txns)")
    p.add_argument("--txns", type=int, help="stop after this many transactions and DDLs")
    p.add_argument("--writers", type=int, default=8, help="concurrent writers and connections")
    p.add_argument("--rate", type=float, help="target transactions per second, all writers")
    p.add_argument("--seed", type=int, help="random seed (default: random)")
    p.add_argument("--database", help="upstream database (default: the kind's name)")
    p.add_argument("--accounts", type=int, default=1000, help="bank accounts (default 1000)")
    p.add_argument("--ddl-ratio", type=float, default=0.02, help="mixed: share of DDL steps")
    p.add_argument("--ssl-ca", default="", help="CA file (PEM) the pumps' certificates chain to")
    p.add_argument("--ssl-cert", default="", help="client certificate file (PEM)")
    p.add_argument("--ssl-key", default="", help="client key file (PEM)")
    p.add_argument("--log-level", default="info")
    add_version_flag(p)
    ns = p.parse_args(argv)
    urls = tuple(u.strip() for u in ns.pd_urls.split(",") if u.strip())
    if not urls:
        p.error("--pd-urls needs at least one endpoint")
    if ns.writers < 1:
        p.error("--writers must be at least 1")
    security = SecuritySettings(ns.ssl_ca, ns.ssl_cert, ns.ssl_key)
    for key, problem in security.validate():
        p.error(f"--{key}: {problem}")
    duration = ns.duration if ns.duration is not None or ns.txns is not None else 30.0
    return Options(
        ns.kind,
        ns.upstream,
        urls,
        duration,
        ns.txns,
        ns.writers,
        ns.rate,
        ns.seed,
        ns.database,
        ns.accounts,
        ns.ddl_ratio,
        ns.log_level,
        security,
    )


async def run(opts: Options, stop: asyncio.Event) -> WorkloadStats:
    mixed = MixedOptions(ddl_ratio=opts.ddl_ratio)
    workload = make_workload(opts.kind, opts.database, accounts=opts.accounts, mixed=mixed)
    tls: ssl.SSLContext | None = client_context(opts.security, check_hostname=False)
    async with EtcdKv.connect(list(opts.pd_urls)) as kv:
        cluster_id = await read_cluster_id(kv)
        if cluster_id is None:
            raise SystemExit("no cluster ID in etcd: start the pumps first")
        async with (
            TsoClient(kv, cluster_id, ssl_context=tls) as tso,
            PumpsClient(kv, cluster_id, ssl_context=tls) as pumps,
            open_upstream(opts.upstream, writers=opts.writers) as upstream,
        ):
            return await run_workload(
                workload,
                upstream,
                pumps,
                tso,
                KvDdlHistory(kv),
                writers=opts.writers,
                duration=opts.duration,
                txns=opts.txns,
                rate=opts.rate,
                seed=opts.seed,
                stop=stop,
            )


async def _main(opts: Options) -> WorkloadStats:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        return await run(opts, stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    configure_logging(opts.log_level)
    stats = asyncio.run(_main(opts))
    sys.stdout.write(json.dumps(stats.as_dict()) + "\n")
    return 0
