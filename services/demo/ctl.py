"""Running ``binlogctl`` as an operator would: a separate process, output captured.

A tool's command is its console script beside the interpreter when it is
installed (``binlogctl``, ``tributary-check``), else ``python -m <module>``;
:func:`shown` renders it the way a user can paste it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from services.demo.errors import DemoError
from tributary.servicekit.spawn import exited, reader, start

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
    """Run binlogctl with ``args``: the argv, its exit code and its output (stdout + stderr).

    Started with ``Popen``, not ``create_subprocess_exec``: the demo runs grpcio's threads (its
    etcd client), see ``tributary.servicekit.spawn``."""
    argv = [*ctl_argv(), *args]
    proc = start(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        stream, transport = await reader(proc.stdout)
    except BaseException:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        raise
    try:
        async with asyncio.timeout(CTL_TIMEOUT):
            out = await stream.read()
            code = await exited(proc)
    except BaseException as e:  # timeout or cancellation: never leave it running
        if proc.poll() is None:
            proc.kill()
        await exited(proc)
        if isinstance(e, TimeoutError):
            raise DemoError(f"`{shown(argv)}` did not finish within {CTL_TIMEOUT:.0f} s") from e
        raise
    finally:
        transport.close()
    return argv, code, out.decode(errors="replace")
