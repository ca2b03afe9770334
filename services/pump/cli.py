"""``binlog-pump``: parse settings, configure logging, run the pump.

Signals: the first SIGTERM/SIGINT pauses the pump gracefully (refuse new
prewrites, finish, record ``paused``); a second one exits at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.pump.app import serve
from tributary.config.pump import PumpConfig
from tributary.servicekit.gctune import relax_gc
from tributary.servicekit.main import run_service


def main(argv: Sequence[str] | None = None) -> int:
    relax_gc()
    return run_service("binlog-pump", PumpConfig, "PUMP", serve, argv)
