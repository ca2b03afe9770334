"""``reparo``: parse settings, configure logging, replay the data directory.

Exit codes: 0 when everything in range was applied, 2 for bad settings, 1 for a failure while
running (the message names what failed: a file and offset, a transaction's commit ts, the
destination).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from services.reparo.app import run
from services.reparo.config import ReparoConfig
from tributary.settings import SettingsError, dump, load
from tributary.sinks import SinkError
from tributary.telemetry import configure_logging_from
from tributary.telemetry.progress import open_progress
from tributary.version import version_text

log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        cfg = load(ReparoConfig, args, os.environ, "REPARO", prog="reparo", version=version_text())
    except SettingsError as e:
        print(f"reparo: {e}", file=sys.stderr)
        return 2
    configure_logging_from(cfg.log)
    log.debug("reparo effective configuration:\n%s", dump(cfg))
    progress = open_progress("reparo", mode=cfg.progress.mode, interval=cfg.progress.interval)
    try:
        with progress:
            asyncio.run(run(cfg, progress))
    except SinkError as e:
        log.error("reparo failed: %s", e)
        if cfg.log.file:  # the log is elsewhere: say it on stderr too
            print(f"reparo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        log.warning("reparo interrupted")
        return 1
    except Exception as e:
        log.exception("reparo failed")
        print(f"reparo: unexpected error: {e!r}", file=sys.stderr)
        return 1
    return 0
