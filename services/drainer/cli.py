"""``binlog-drainer``: parse settings, configure logging, run the drainer.

Signals: the first SIGTERM/SIGINT stops the drainer gracefully (stop pulling,
apply what was merged, save the checkpoint, record ``paused``); a second one
exits at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from servicekit.main import run_service
from services.drainer.app import serve
from services.drainer.config import DrainerConfig


def main(argv: Sequence[str] | None = None) -> int:
    return run_service("binlog-drainer", DrainerConfig, "DRAINER", serve, argv)
