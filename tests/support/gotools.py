"""Go programs under tests/go, built once by ``scripts/go-tools`` into a cache directory."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "go-tools"


def go_tool(name: str) -> Path:
    """The built ``tests/go/<name>`` binary (building it first if needed)."""
    if shutil.which("go") is None:
        found = subprocess.run([str(SCRIPT), name, "--check"], capture_output=True, text=True)
        if found.returncode != 0:
            raise RuntimeError(f"no Go toolchain to build tests/go/{name} (scripts/go-tools)")
        return Path(found.stdout.strip())
    done = subprocess.run([str(SCRIPT), name], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/go-tools {name} failed: {done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])
