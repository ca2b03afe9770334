"""Which tables to compare: include and exclude patterns over ``schema.table`` names.

A pattern is an exact name (``bank.accounts``), every table of a schema (``bank.*``), or a
regular expression after ``~`` searched in the name (``~^bank\\.acc``, as tidb-binlog's
filters read ``~``). With no include pattern every table is included; an excluded table is
left out even when included.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tributary.checker.errors import UsageError
from tributary.checker.model import TableName

Matcher = Callable[[str], bool]


def _matcher(pattern: str) -> Matcher:
    if pattern.startswith("~"):
        try:
            rx = re.compile(pattern[1:])
        except re.error as e:
            raise UsageError(f"bad table pattern {pattern!r}: {e}") from e
        return lambda name: rx.search(name) is not None
    if not pattern or pattern.strip() != pattern:
        raise UsageError(f"bad table pattern {pattern!r}")
    if pattern.endswith(".*"):
        prefix = pattern[:-1]
        return lambda name: name.startswith(prefix)
    return lambda name: name == pattern


@dataclass(frozen=True)
class TableFilter:
    include: tuple[Matcher, ...]
    exclude: tuple[Matcher, ...]

    @classmethod
    def of(cls, include: Sequence[str] | None, exclude: Sequence[str] | None) -> TableFilter:
        if isinstance(include, str) or isinstance(exclude, str):
            raise UsageError("table patterns are a list of strings, not one string")
        return cls(
            tuple(_matcher(p) for p in include or ()), tuple(_matcher(p) for p in exclude or ())
        )

    def __call__(self, name: TableName) -> bool:
        text = str(name)
        if self.include and not any(m(text) for m in self.include):
            return False
        return not any(m(text) for m in self.exclude)
