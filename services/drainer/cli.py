"""``binlog-drainer``: parse settings, configure logging, run the drainer.

Signals: the first SIGTERM/SIGINT stops the drainer gracefully (stop pulling,
apply what was merged, save the checkpoint, record ``paused``); a second one
exits at once.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

from services.drainer.app import serve
from tributary.config.drainer import DrainerConfig
from tributary.servicekit.main import run_service

# The drainer makes and drops millions of short-lived row objects and almost no reference cycles:
# with the default thresholds the cyclic collector ran often enough to take about a tenth of its
# CPU. Modules and settings loaded at start-up are frozen out of collection altogether.
GC_THRESHOLDS = (50_000, 20, 100)


def main(argv: Sequence[str] | None = None) -> int:
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    return run_service("binlog-drainer", DrainerConfig, "DRAINER", serve, argv)
