"""``binlog-drainer``: parse settings, configure logging, run the drainer.

Signals: the first SIGTERM/SIGINT stops the drainer gracefully (stop pulling,
apply what was merged, save the checkpoint, record ``paused``); a second one
exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

import uvloop

from services.drainer.app import serve
from services.drainer.config import DrainerConfig
from settings import SettingsError, dump, load
from telemetry import configure_logging

log = logging.getLogger("services.drainer")


async def _main(cfg: DrainerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def on_signal() -> None:
        if stop.is_set():
            log.warning("second signal: exiting now")
            main.cancel()
        else:
            stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await serve(cfg, stop)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        cfg = load(
            DrainerConfig,
            sys.argv[1:] if argv is None else argv,
            os.environ,
            "DRAINER",
            prog="binlog-drainer",
        )
    except SettingsError as e:
        print(f"binlog-drainer: {e}", file=sys.stderr)
        return 2
    configure_logging(
        cfg.log_level, "json" if cfg.log_format == "json" else "text", cfg.log_file or None
    )
    log.info("effective configuration:\n%s", dump(cfg))
    try:
        uvloop.run(_main(cfg))
    except asyncio.CancelledError:
        return 1
    except Exception:
        log.exception("drainer failed")
        return 1
    return 0
