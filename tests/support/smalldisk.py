"""A real, small filesystem for full-disk tests: a size-limited tmpfs mounted for one test.

``small_disk(path, size)`` mounts a tmpfs of ``size`` bytes at ``path`` (root only; the test is
skipped with the reason when mounting is not possible) and always unmounts it at the end. The
disk is filled for real: ``fill_to(free)`` allocates a filler file until only ``free`` bytes are
left (0: the disk is full, every write past it gets ENOSPC), ``release()`` deletes the filler.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

FILLER = ".filler"


@dataclass
class SmallDisk:
    root: Path

    @property
    def available(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def fill_to(self, free: int) -> None:
        """Grow the filler file until at most ``free`` bytes are left on the disk."""
        fd = os.open(self.root / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            chunk = b"\0" * (1 << 20)
            while (over := self.available - free) > 0:
                try:
                    os.write(fd, chunk[: min(len(chunk), over)])
                except OSError:  # ENOSPC: the disk is full, as asked for with free=0
                    break
        finally:
            os.close(fd)
        assert self.available <= max(free, 0) + 4096, self.available

    def release(self) -> None:
        """Delete the filler: the space it took is free again."""
        (self.root / FILLER).unlink(missing_ok=True)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


@contextlib.contextmanager
def small_disk(path: Path, size: int) -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` bytes at ``path`` for the duration of the block."""
    if os.geteuid() != 0:
        pytest.skip("a full-disk test mounts a small tmpfs, which needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path}: {mounted.stderr.strip()}")
    try:
        yield SmallDisk(path)
    finally:
        if _run("umount", str(path)).returncode != 0:
            _run("umount", "-l", str(path))  # still busy: detach now, freed when unused
