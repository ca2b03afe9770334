"""The storage sink's directory store (``file://``, ``store.Store``): a file appears whole or
not at all, and a data file, once there, is never replaced.

* ``create`` writes the bytes to a new file under ``.tmp/``, fsyncs it, then hard-links it to
  its name (``link`` fails if the name exists, so nothing anyone may have read is ever
  overwritten, even by a second writer in the same directory) and fsyncs that directory;
  False when the name was taken.
* ``replace`` is for the files that are meant to change (``metadata``, ``meta/CDC.index``):
  the new bytes are fsynced in a temporary file, renamed over the old one, and the directory is
  fsynced.
* directories are created with their parents fsynced, so a file that survived a crash is
  reachable after it; ``open`` empties ``.tmp/`` (files of a writer that died mid-write).

A crash at any point leaves every data and schema file either complete or absent, and a new
file never lands on one a consumer may have read. The directory's file system must support hard
links (local disks and NFS do).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path, PurePosixPath

from tributary.sinks.storage.layout import TMP_DIR


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Files:
    """The sink's root directory (blocking calls: run them in a thread)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dirs: set[Path] = set()  # directories known to exist, durably

    @property
    def location(self) -> str:
        return str(self.root)

    def open(self) -> None:
        """Create the root and ``.tmp/``; remove what a writer that died left in ``.tmp/``."""
        self.ensure_dir(self.root / TMP_DIR)
        for leftover in (self.root / TMP_DIR).iterdir():
            leftover.unlink(missing_ok=True)

    def ensure_dir(self, path: Path) -> None:
        if path in self._dirs:
            return
        if not path.is_dir():
            if path.parent != path:
                self.ensure_dir(path.parent)
            try:
                path.mkdir()
            except FileExistsError:
                pass
            fsync_dir(path.parent)
        self._dirs.add(path)

    def _temporary(self, data: bytes) -> Path:
        tmp = self.root / TMP_DIR / f"{uuid.uuid4().hex}.tmp"
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def create(self, relative: PurePosixPath, data: bytes) -> bool:
        """Write a new file durably; False (nothing written) if the name exists."""
        final = self.root / relative
        self.ensure_dir(final.parent)
        tmp = self._temporary(data)
        try:
            os.link(tmp, final)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(final.parent)
        return True

    def replace(self, relative: PurePosixPath, data: bytes) -> None:
        final = self.root / relative
        self.ensure_dir(final.parent)
        tmp = self._temporary(data)
        try:
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(final.parent)

    def read(self, relative: PurePosixPath) -> bytes | None:
        try:
            return (self.root / relative).read_bytes()
        except FileNotFoundError:
            return None

    def size(self, relative: PurePosixPath) -> int | None:
        try:
            return (self.root / relative).stat().st_size
        except FileNotFoundError:
            return None

    def list_names(self, relative: PurePosixPath) -> list[str]:
        try:
            return [p.name for p in (self.root / relative).iterdir() if p.is_file()]
        except FileNotFoundError:
            return []

    def walk(self) -> list[str]:
        found: list[str] = []
        for here, dirs, names in os.walk(self.root):
            dirs[:] = [d for d in dirs if d != TMP_DIR]
            rel_dir = Path(here).relative_to(self.root).as_posix()
            found.extend(f"{rel_dir}/{n}" if rel_dir != "." else n for n in names)
        return found
