"""``binlog-drainer``: parse settings, configure logging, run the drainer.

Signals: the first SIGTERM/SIGINT stops the drainer gracefully (stop pulling,
apply what was merged, save the checkpoint, record ``paused``); a second one
exits at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.drainer.app import serve
from tributary.config.drainer import DrainerConfig
from tributary.servicekit.gctune import relax_gc
from tributary.servicekit.main import run_service


def main(argv: Sequence[str] | None = None) -> int:
    relax_gc()
    return run_service("binlog-drainer", DrainerConfig, "DRAINER", serve, argv)
