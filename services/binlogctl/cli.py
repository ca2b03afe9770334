"""``binlogctl``: parse settings, run one command, print its result.

Output: the result on stdout (text, or JSON with ``--json``); warnings, progress
and errors on stderr. Exit codes: 0 done; 1 the command failed (the message says
why, no traceback); 2 bad usage or settings; 130 interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from services.binlogctl import commands
from services.binlogctl.config import CtlConfig, split_command
from services.binlogctl.errors import CtlError, singular
from services.binlogctl.render import render, update_warning
from tributary.settings import SettingsError, load
from tributary.telemetry import configure_logging_from
from tributary.version import version_text

log = logging.getLogger("services.binlogctl")

PROG = "binlogctl"
ENV_PREFIX = "BINLOGCTL"


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def parse(argv: Sequence[str]) -> CtlConfig:
    """Settings from ``argv`` (program name excluded) and ``BINLOGCTL_*``; SettingsError."""
    return load(
        CtlConfig, split_command(argv), os.environ, ENV_PREFIX, prog=PROG, version=version_text()
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        cfg = parse(sys.argv[1:] if argv is None else argv)
    except SettingsError as e:
        _err(f"{PROG}: {e}\nrun `{PROG} --help` for usage")
        return 2
    except SystemExit as e:  # --help, -V
        return e.code if isinstance(e.code, int) else 0
    configure_logging_from(cfg.log)
    command = cfg.command
    if command.verb == "update" and command.kind is not None:
        _err(update_warning(command.value, singular(command.kind)))
    try:
        result = asyncio.run(commands.run(cfg, progress=_err))
    except CtlError as e:
        _err(f"{PROG}: {command.value} failed: {e}")
        return 1
    except KeyboardInterrupt:
        _err(f"{PROG}: interrupted")
        return 130
    except Exception:
        log.exception("%s failed unexpectedly", command.value)
        return 1
    print(render(result, as_json=cfg.as_json, tz=cfg.zone()), flush=True)
    return 0
