"""``python -m services.demo``: parse options and the environment, configure logging, run.

Signals: the first Ctrl-C (SIGINT) or SIGTERM stops the demo cleanly (writers finish their
transaction, then the drainer, the pumps and etcd stop); a second one kills every child and
exits at once, without waiting on any library's cleanup. Exit codes: 0 PASS (or ``--keep``
ended by Ctrl-C after a PASS), 1 FAIL or an error, 2 bad usage (flags or
``TRIBUTARY_DEMO_UPSTREAM``/``TRIBUTARY_DEMO_DOWNSTREAM``), 130 interrupted before the result.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from services.demo.app import Options
from services.demo.app import main as run_demo
from services.demo.endpoints import DOWNSTREAM_ENV, UPSTREAM_ENV, UsageError, endpoints_from
from services.demo.errors import DemoError
from services.demo.procs import Supervisor
from services.demo.ui import Console
from tributary.telemetry import configure_logging

log = logging.getLogger("services.demo")


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _writers(text: str) -> int:
    value = int(text)
    if not 2 <= value <= 200:
        raise argparse.ArgumentTypeError(f"must be in 2..200, got {text}")
    return value


def parse(argv: Sequence[str], env: Mapping[str, str]) -> tuple[Options, str]:
    """Options from ``argv`` and ``env``; exits with code 2 on bad usage."""
    p = argparse.ArgumentParser(
        prog="python -m services.demo",
        description="Run the whole pipeline on this machine: etcd, two pumps, a drainer, the "
        "bank and mixed workloads against an upstream database, then check that the "
        "downstream equals the upstream.",
        epilog=f"{UPSTREAM_ENV}=mysql://user:pw@host:port and {DOWNSTREAM_ENV}=... put either "
        "side on a MySQL/MariaDB server instead of a SQLite file in the data dir.",
    )
    p.add_argument("--duration", type=_positive, default=30.0, help="seconds of load (30)")
    p.add_argument(
        "--writers",
        type=_writers,
        default=8,
        help="concurrent writers, half bank and half mixed (8)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("demo-data"),
        help="data and logs of every process, SQLite files; wiped at start (./demo-data)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep everything running after the result until Ctrl-C, to explore it",
    )
    p.add_argument(
        "-L",
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="log level of the demo's own components, on stderr (warning)",
    )
    args = p.parse_args(argv)
    data_dir = args.data_dir.resolve()
    try:
        ends = endpoints_from(env, data_dir)
    except UsageError as e:
        p.error(str(e))
    opts = Options(
        endpoints=ends,
        duration=args.duration,
        writers=args.writers,
        data_dir=data_dir,
        keep=args.keep,
    )
    return opts, str(args.log_level)


async def _main(opts: Options, supervisor: Supervisor, ui: Console) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if not stop.is_set():
            stop.set()
            return
        # Second signal: the user wants out now. Killing the children here
        # (SIGKILL, reaped) keeps the no-orphan promise even if a graceful
        # step below is stuck.
        ui.error("second signal: killing every process the demo started")
        supervisor.kill_all()
        os._exit(130)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    return await run_demo(opts, supervisor, ui, stop)


def main(argv: Sequence[str] | None = None) -> int:
    opts, level = parse(sys.argv[1:] if argv is None else argv, os.environ)
    configure_logging(level)
    ui = Console()
    supervisor = Supervisor(opts.data_dir)
    try:
        return asyncio.run(_main(opts, supervisor, ui))
    except DemoError as e:
        ui.error(str(e))
        return 1
    except KeyboardInterrupt:
        ui.error("interrupted; killed every process the demo started")
        return 130
    except Exception:
        log.exception("the demo failed unexpectedly")
        return 1
    finally:
        supervisor.kill_all()
