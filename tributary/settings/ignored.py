"""Keys and flags a settings schema knows from the system it follows but does not implement.

tidb-binlog's stock ``pump.toml`` and ``drainer.toml`` (and tidb-operator's start scripts) carry
keys this product has no use for. A settings class lists them as ``ignored_keys``, a class
attribute holding ``Ignored`` entries, each with a one-line reason; an entry names a key or a
whole table (``syncer.relay`` covers every key under it) and the flags that spell it. Invariant:
a listed key or flag given in any source changes nothing and is reported once per load as an
``IgnoredSetting`` (the warning a CLI logs), except a ``refuse`` entry, which is a problem
naming its reason (a key whose absence would change what reaches the downstream); an empty table
sets nothing and says nothing; anything not listed stays an unknown key. ``refused`` makes some
values a problem and the others warnings (``loopback-control = true`` would replicate in a
loop; ``false`` is what happens anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ignored:
    """One known-but-ignored key (dotted TOML path of a key or a table) and its flags."""

    key: str
    reason: str
    flags: tuple[str, ...] = ()  # e.g. ("--metrics-addr",); "-metrics-addr" works as always
    switch: bool = False  # a boolean flag: given alone, or as -flag=true|false
    refuse: bool = False  # a problem instead of a warning
    refused: tuple[str, ...] = ()  # values that are a problem (compared as lower-case text)

    def covers(self, key: str) -> bool:
        return key == self.key or key.startswith(self.key + ".")

    def refuses(self, raw: object) -> bool:
        """Whether giving ``raw`` is a problem rather than a warning."""
        return self.refuse or str(raw).strip().lower() in self.refused


@dataclass(frozen=True)
class IgnoredSetting:
    """A warning: ``key`` (an ignored entry's) was given by ``origin`` and is ignored for
    ``reason``; ``within`` names the keys set in it when it is a table."""

    key: str
    origin: str
    reason: str
    within: tuple[str, ...] = ()

    def __str__(self) -> str:
        inner = f" [{', '.join(self.within)}]" if self.within else ""
        return f"{self.key}{inner} ({self.origin}) is ignored: {self.reason}"


def ignored_keys(cls: type[Any]) -> tuple[Ignored, ...]:
    """The ``ignored_keys`` a settings class declares (none by default)."""
    entries: Sequence[Ignored] = getattr(cls, "ignored_keys", ())
    return tuple(entries)


def match(entries: Sequence[Ignored], key: str) -> Ignored | None:
    """The entry covering dotted ``key``, if any."""
    return next((e for e in entries if e.covers(key)), None)


def given_keys(raw: object, prefix: str = "") -> list[str]:
    """The leaf keys set in a TOML value (a table's nested keys, or ``[]`` for an empty one)."""
    if not isinstance(raw, Mapping):
        return [prefix] if prefix else []
    keys: list[str] = []
    for k, v in raw.items():
        keys += given_keys(v, f"{prefix}.{k}" if prefix else str(k))
    return keys
