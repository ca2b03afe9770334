"""``python -m services.demo``: parse options, configure logging, run the demo.

Signals: the first Ctrl-C (SIGINT) or SIGTERM stops the demo cleanly (writers
finish their transaction, then pumps, then etcd); a second one kills every
child and exits at once, without waiting on any library's cleanup. Exit codes:
0 verified (or ``--keep`` ended by Ctrl-C after a pass), 1 the check failed or
an error, 2 bad usage, 130 interrupted before the check finished.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from services.demo.app import Options, run
from services.demo.errors import DemoError
from services.demo.procs import Supervisor
from services.demo.ui import Console
from telemetry import configure_logging

log = logging.getLogger("services.demo")


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be in 1..1000, got {text}")
    return value


def parse(argv: Sequence[str]) -> tuple[Options, str]:
    p = argparse.ArgumentParser(
        prog="python -m services.demo",
        description="Run a private etcd and two pumps, write bank transactions through the "
        "pump client, show the cluster with binlogctl, and verify every acknowledged commit "
        "comes back out of the pumps exactly once, in commit order.",
    )
    p.add_argument("--duration", type=_positive, default=20.0, help="seconds of load (20)")
    p.add_argument("--writers", type=_count, default=32, help="concurrent writers (32)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("demo-data"),
        help="where etcd and the pumps keep data and logs; wiped at start (./demo-data)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the cluster running after the check until Ctrl-C, to explore it",
    )
    p.add_argument(
        "-L",
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="log level of the demo's own components, on stderr (warning)",
    )
    args = p.parse_args(argv)
    opts = Options(
        duration=args.duration,
        writers=args.writers,
        data_dir=args.data_dir.resolve(),
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
    return await run(opts, supervisor, ui, stop)


def main(argv: Sequence[str] | None = None) -> int:
    opts, level = parse(sys.argv[1:] if argv is None else argv)
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
