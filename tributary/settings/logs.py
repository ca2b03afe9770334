"""The log settings every process shares: ``log-level``, ``log-format``, ``log-file``.

Declared inline (``group(LogSettings, ..., inline=True)``), so the keys stay top-level as in
tidb-binlog's pump.toml and drainer.toml, the environment variables are ``<PREFIX>_LOG_LEVEL``...
and ``-L`` abbreviates ``--log-level``. Configuring the ``logging`` module from them is
``telemetry.configure_logging``'s job, done by each CLI.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.settings.kinds import choice
from tributary.settings.model import setting

LEVELS = ("debug", "info", "warn", "warning", "error")


@dataclass(frozen=True)
class LogSettings:
    """Where and how the process logs."""

    level: str = setting(
        "info", "log level", toml="log-level", kind=choice(*LEVELS), flag=("-L", "--log-level")
    )
    format: str = setting("text", "log format", toml="log-format", kind=choice("text", "json"))
    file: str = setting("", "log file (default: stderr)", toml="log-file")
