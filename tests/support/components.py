"""The real components the tests use, looked up, never built or installed here.

``make deps`` (scripts/deps) prepares every component before the tests run; a fixture asks for
one by its name in that script's list and gets the path that proves it present, or
``ComponentMissing`` ("NAME is missing: run `make deps`") at once, a failure and never a skip.
This module is the only test code that runs scripts/deps, and only its ``--check`` mode
(tests/unit/test_no_installs_in_tests.py keeps it so).
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPS = REPO / "scripts" / "deps"


class ComponentMissing(RuntimeError):
    """A component the test needs was not prepared: run ``make deps``."""


@functools.cache
def _lookup(name: str) -> str | None:
    done = subprocess.run(
        [sys.executable, str(DEPS), "--check", name], capture_output=True, text=True, timeout=120
    )
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 else None


def component(name: str) -> Path:
    """The path proving ``name`` present (a binary, a directory of them, a jar, an archive)."""
    found = _lookup(name)
    if found is None:
        _lookup.cache_clear()  # a `make deps` in another terminal may bring it
        raise ComponentMissing(f"{name} is missing: run `make deps`")
    return Path(found)
