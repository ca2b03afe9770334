"""The progress settings of long-running commands (reparo, the checker): ``progress`` and
``progress-interval``.

Declared inline, so the keys are top-level (``--progress``, ``<PREFIX>_PROGRESS``). Showing the
progress is ``telemetry.progress``'s job; ``auto`` redraws one line on a terminal and logs at
info every ``progress-interval`` seconds otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from tributary.settings.kinds import FLOAT, choice
from tributary.settings.model import setting

MODES = ("auto", "tty", "log", "off")


@dataclass(frozen=True)
class ProgressSettings:
    """How a long command shows its progress."""

    mode: str = setting(
        "auto",
        "progress (rows, rate, ETA): auto = redrawn on stderr when it is a terminal, else "
        "logged at info; tty; log; off",
        toml="progress",
        kind=choice(*MODES),
    )
    interval: float = setting(
        10.0, "seconds between logged progress lines", toml="progress-interval", kind=FLOAT
    )
