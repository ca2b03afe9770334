"""Stopping the real processes the tests own (brokers, servers, etcd, the API server)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any


def stop_process(
    proc: subprocess.Popen[Any], timeout: float, kill: Callable[[], None] | None = None
) -> None:
    """SIGTERM ``proc`` and wait up to ``timeout`` s; past it ``kill()`` (by default SIGKILL
    ``proc`` and wait for it). Nothing to do when it has already ended."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        if kill is not None:
            kill()
        else:
            proc.kill()
            proc.wait()
