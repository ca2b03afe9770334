"""``binlog-status``: serve the cluster status page and its JSON API.

binlog-status --pd-urls http://127.0.0.1:2379 --addr 0.0.0.0:8288
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from services.status.app import serve
from services.status.config import StatusConfig
from tributary.servicekit.main import run_service


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run_service("binlog-status", StatusConfig, "STATUS", serve, args)
