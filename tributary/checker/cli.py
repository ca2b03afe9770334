"""``tributary-check`` / ``python -m tributary.checker``: parse settings, compare, print the report.

Output: the report on stdout (text, or JSON with ``--json``); diagnostics, errors and the
progress (``--progress``: redrawn on a terminal, else logged at info) on stderr.
Exit codes: 0 the sides are equal; 1 differences found; 2 bad usage, bad settings or a
database that failed (connection, query); 130 interrupted.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence

from tributary.checker.compare import compare
from tributary.checker.config import CheckConfig
from tributary.checker.errors import CheckerError
from tributary.settings import SettingsError, load
from tributary.telemetry import configure_logging_from
from tributary.telemetry.progress import open_progress
from tributary.version import version_text

PROG = "tributary-check"
ENV_PREFIX = "TRIBUTARY_CHECK"
EQUAL, DIFFERENT, FAILED, INTERRUPTED = 0, 1, 2, 130


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def parse(argv: Sequence[str]) -> CheckConfig:
    """Settings from ``argv`` (program name excluded) and ``TRIBUTARY_CHECK_*``."""
    return load(CheckConfig, argv, os.environ, ENV_PREFIX, prog=PROG, version=version_text())


def main(argv: Sequence[str] | None = None) -> int:
    try:
        cfg = parse(sys.argv[1:] if argv is None else argv)
    except SettingsError as e:
        _err(f"{PROG}: {e}\nrun `{PROG} --help` for usage")
        return FAILED
    except SystemExit as e:  # --help, -V
        return e.code if isinstance(e.code, int) else EQUAL
    configure_logging_from(cfg.log)
    progress = open_progress(
        PROG,
        mode=cfg.progress.mode,
        interval=cfg.progress.interval,
    )
    try:
        with progress:
            report = asyncio.run(
                compare(
                    cfg.upstream,
                    cfg.downstream,
                    tables=cfg.tables or None,
                    exclude=cfg.exclude or None,
                    chunk_size=cfg.chunk_size,
                    max_diffs=cfg.max_diffs,
                    progress=progress,
                )
            )
    except CheckerError as e:
        _err(f"{PROG}: {e}")
        return FAILED
    except KeyboardInterrupt:
        _err(f"{PROG}: interrupted")
        return INTERRUPTED
    print(report.to_json() if cfg.as_json else report.render_text(), flush=True)
    return EQUAL if report.equal else DIFFERENT
