"""The settings error root: every problem found while loading, reported together.

Invariant: a ``SettingsError`` lists all problems of one load (bad values from every source,
unknown keys, failed cross-field checks), each naming the setting and where the value came from,
so an operator fixes a configuration in one round.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tributary.errors import TributaryError


@dataclass(frozen=True)
class Problem:
    """One bad setting. ``origin``: ``"file pump.toml"``, ``"env PUMP_GC"``, ``"flag --gc"``,
    ``"default"``, or ``"command line"`` for flag syntax errors."""

    key: str
    origin: str
    message: str

    def __str__(self) -> str:
        return f"{self.key} ({self.origin}): {self.message}"


class SettingsError(TributaryError):
    """Invalid configuration; never retriable: the operator has to change it."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "".join(f"\n  - {p}" for p in self.problems)
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in settings:{lines}")
