"""Go programs under tests/go with modules of their own, built by ``make deps`` (go-tools)."""

from __future__ import annotations

from pathlib import Path

from tests.support.components import component

# the program's directory under tests/go -> its name in scripts/deps' list
COMPONENTS = {"binlogreader": "binlogreader", "tidbserver": "tidb-server"}


def go_tool(name: str) -> Path:
    """The built ``tests/go/<name>`` binary; missing, the test fails at once."""
    return component(COMPONENTS[name])
