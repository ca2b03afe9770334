"""Running ``binlogctl`` as an operator would: a separate process, output captured.

A tool's command is its console script beside the interpreter when it is
installed (``binlogctl``, ``tributary-check``), else ``python -m <module>``;
:func:`shown` renders it the way a user can paste it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from services.demo.errors import DemoError

CTL_TIMEOUT = 60.0  # seconds one binlogctl run may take


def tool_argv(script: str, module: str) -> list[str]:
    beside = Path(sys.executable).parent / script
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", module]


def ctl_argv() -> list[str]:
    return tool_argv("binlogctl", "services.binlogctl")


def check_argv() -> list[str]:
    return tool_argv("tributary-check", "checker")


def shown(argv: Sequence[str]) -> str:
    """``argv`` as a command line, paths under the current directory made relative."""
    cwd = Path.cwd()
    parts = []
    for arg in argv:
        path = Path(arg)
        if path.is_absolute() and path.is_relative_to(cwd):
            arg = os.path.relpath(path, cwd)
        parts.append(arg)
    return " ".join(parts)


async def run_binlogctl(*args: str) -> tuple[list[str], int, str]:
    """Run binlogctl with ``args``: the argv, its exit code and its output (stdout + stderr)."""
    argv = [*ctl_argv(), *args]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), CTL_TIMEOUT)
    except BaseException as e:  # timeout or cancellation: never leave it running
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        if isinstance(e, TimeoutError):
            raise DemoError(f"`{shown(argv)}` did not finish within {CTL_TIMEOUT:.0f} s") from e
        raise
    assert proc.returncode is not None
    return argv, proc.returncode, out.decode(errors="replace")
