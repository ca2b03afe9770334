"""Where the drainer keeps its checkpoint: the ``CheckpointStore`` port and the savepoint file.

A checkpoint ``commit_ts`` means: every binlog with a commit ts <= it has been
applied downstream, so a restart pulls from just after it. ``consistent`` is
true only when the drainer stopped cleanly (tidb-binlog's ``consistent``).

``FileCheckpoint`` keeps it in ``<data-dir>/savepoint`` as tidb-binlog's file
checkpoint does (TOML ``consistent`` and ``commitTS``). It also reads what
``binlogctl generate_meta`` writes there (``commitTS = N`` plus time lines: ours
writes them as comments, tidb-binlog's as bare ``UTC: ...`` lines, which are
skipped). Invariant: the file is replaced atomically (temporary file, fsync,
rename, fsync of the directory), so a crash leaves the old checkpoint or the
new one, never a torn one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from services.drainer.errors import CheckpointError

log = logging.getLogger(__name__)

SAVEPOINT = "savepoint"
LATEST = -1  # initial-commit-ts meaning "the current TSO timestamp"


class CheckpointStore(Protocol):
    async def load(self) -> int | None:
        """The saved commit ts, or None when no checkpoint was ever saved."""

    async def save(self, commit_ts: int, consistent: bool) -> None:
        """Durably record ``commit_ts``; raises CheckpointError on failure."""


def render_savepoint(commit_ts: int, consistent: bool) -> str:
    return f"consistent = {'true' if consistent else 'false'}\ncommitTS = {commit_ts}\n"


def parse_savepoint(text: str, origin: str = SAVEPOINT) -> tuple[int, bool]:
    """``(commitTS, consistent)`` of a savepoint file's text."""
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        doc = _lenient(text)
    commit_ts = doc.get("commitTS")
    if not isinstance(commit_ts, int) or isinstance(commit_ts, bool) or commit_ts < 0:
        raise CheckpointError(f"{origin}: no valid commitTS (want a non-negative integer)")
    consistent = doc.get("consistent", False)
    if not isinstance(consistent, bool):
        raise CheckpointError(f"{origin}: consistent must be true or false")
    return commit_ts, consistent


def _lenient(text: str) -> dict[str, Any]:
    """Line by line, keeping the lines that are TOML key/value pairs."""
    doc: dict[str, Any] = {}
    for line in text.splitlines():
        try:
            doc.update(tomllib.loads(line))
        except tomllib.TOMLDecodeError:
            log.debug("savepoint: ignoring line %r", line)
    return doc


class FileCheckpoint:
    """The ``CheckpointStore`` in ``<data_dir>/savepoint``."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / SAVEPOINT
        self.consistent: bool | None = None  # as loaded; None before load or without a file

    async def load(self) -> int | None:
        return await asyncio.to_thread(self._load)

    async def save(self, commit_ts: int, consistent: bool) -> None:
        await asyncio.to_thread(self._write, render_savepoint(commit_ts, consistent))

    def _load(self) -> int | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise CheckpointError(f"cannot read {self.path}: {e}") from e
        commit_ts, self.consistent = parse_savepoint(text, str(self.path))
        return commit_ts

    def _write(self, text: str) -> None:
        directory = self.path.parent
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{SAVEPOINT}.", dir=directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o644)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as e:
            raise CheckpointError(f"cannot write {self.path}: {e}", retriable=True) from e


async def start_ts(
    saved: int | None, initial_commit_ts: int, latest_ts: Callable[[], Awaitable[int]]
) -> tuple[int, bool]:
    """``(ts to start after, whether it is the saved checkpoint)``.

    ``saved`` is what the checkpoint store held (``None``: nothing yet); ``initial_commit_ts``
    counts only then, and -1 asks the TSO for the current timestamp (``latest_ts``).
    """
    if saved is not None:
        return saved, True
    if initial_commit_ts == LATEST:
        return await latest_ts(), False
    if initial_commit_ts < 0:
        raise CheckpointError(f"initial-commit-ts must be -1 or >= 0, got {initial_commit_ts}")
    return initial_commit_ts, False
