"""Command line of the standalone TSO server: parse flags, configure logging, run.

Parsing (``parse_args`` -> ``TsoServerConfig``) is kept apart from running so
it can move onto the shared settings loader without touching the app.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Sequence

import uvloop

from services.tso.app import DEFAULT_ADDR, TsoServerApp, TsoServerConfig
from tributary.telemetry.logs import configure_logging
from tributary.version import add_version_flag

log = logging.getLogger(__name__)


def parse_args(argv: Sequence[str] | None = None) -> TsoServerConfig:
    parser = argparse.ArgumentParser(
        prog="binlog-tso",
        description=(
            "Timestamp oracle: serves binlogext.Tso/GetTimestamps, PD's GetMembers/Tso, "
            "and relays etcd's API, so PD clients can be given this address alone."
        ),
    )
    parser.add_argument(
        "--pd-urls",
        default="http://127.0.0.1:2379",
        help="comma-separated etcd endpoints (default %(default)s)",
    )
    parser.add_argument(
        "--addr", default=DEFAULT_ADDR, help="host:port to listen on (default %(default)s)"
    )
    parser.add_argument(
        "--advertise-addr",
        default="",
        help="host:port clients reach this server at (default: the bound --addr)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warn", "error", "fatal"],
        help="(default %(default)s)",
    )
    add_version_flag(parser)
    ns = parser.parse_args(argv)
    urls = tuple(u.strip() for u in ns.pd_urls.split(",") if u.strip())
    if not urls:
        parser.error("--pd-urls needs at least one endpoint")
    return TsoServerConfig(
        pd_urls=urls, addr=ns.addr, advertise_addr=ns.advertise_addr, log_level=ns.log_level
    )


async def run(config: TsoServerConfig) -> None:
    """Serve until SIGINT/SIGTERM (the handlers only set an event)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with TsoServerApp(config) as app:
            log.info("TSO server listening on port %d as %s", app.port, app.advertise_addr)
            await app.serve_until(stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    configure_logging(config.log_level)
    uvloop.run(run(config))
    return 0
