"""Fixtures shared by every test level."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.etcd import EtcdProcess, run_etcd

_free_at_start: list[float] = []


def _free_gib() -> float:
    return shutil.disk_usage(tempfile.gettempdir()).free / 2**30


def pytest_configure() -> None:
    """An xdist worker hands out ports from a block of its own (``free_port``), so two workers
    never both pick a port that is free at the moment and then race to bind it."""
    worker, count = (
        os.environ.get("PYTEST_XDIST_WORKER"),
        os.environ.get("PYTEST_XDIST_WORKER_COUNT"),
    )
    if worker and count:
        os.environ["TRIBUTARY_PORT_BLOCK"] = f"{worker.removeprefix('gw')}/{count}"


def pytest_sessionstart() -> None:
    _free_at_start.append(_free_gib())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The space left where tests write: a full disk fails every later test at once."""
    terminalreporter.write_line(
        f"temporary space in {tempfile.gettempdir()}: {_free_at_start[0]:.1f} GiB free at "
        f"the start, {_free_gib():.1f} GiB at the end"
    )


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    """A fresh, real etcd process for one test."""
    with run_etcd(tmp_path / "etcd") as proc:
        yield proc


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """A CLI's main() configures the root logger; undo what a test's call added."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(h)
        h.close()
    root.setLevel(level)


@pytest.fixture(autouse=True)
async def _no_pending_tasks() -> None:  # type: ignore[misc]
    """Fail a test that leaves background tasks running after it finished."""
    yield  # type: ignore[misc]
    current = asyncio.current_task()
    leftover = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    if leftover:
        for t in leftover:
            t.cancel()
        await asyncio.gather(*leftover, return_exceptions=True)
        names = ", ".join(sorted(t.get_name() for t in leftover))
        pytest.fail(f"test left tasks pending: {names}")
