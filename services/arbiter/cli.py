"""``binlog-arbiter``: parse settings, configure logging, run the arbiter.

Signals: the first SIGTERM/SIGINT stops it gracefully (the batch in hand is applied, the
checkpoint saved with status 0); a second one exits at once. Exit codes: 0 after a graceful
stop, 2 for bad settings, 1 for a failure (a malformed message names its topic, partition and
offset).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.arbiter.app import serve
from services.arbiter.config import ArbiterConfig
from tributary.servicekit.main import run_service


def main(argv: Sequence[str] | None = None) -> int:
    return run_service("binlog-arbiter", ArbiterConfig, "ARBITER", serve, argv)
