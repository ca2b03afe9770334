"""What ``-V``/``--version`` prints, in tidb-binlog's layout, for every console script.

::

    Release Version: 0.1.0
    Git Commit Hash: 1f2e3d...        (only when the install recorded it)
    Build TS: 2024-05-16 12:27:19
    Python Version: 3.11.7
    Python OS/Arch: linux/x86_64

The release is the installed distribution's version (``importlib.metadata``); the commit is the
one pip records for an install from a VCS URL (``direct_url.json``); the build time is when the
distribution's metadata was written (built or installed, which the image does in one step).
Invariant: printing the version needs nothing but the installed package, never a network or a
configuration file, and always succeeds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import UTC, datetime
from importlib import metadata

DISTRIBUTION = "tributary"
FLAGS = ("-V", "--version")
UNKNOWN = "Not provided"


def version_text() -> str:
    """The lines ``-V`` prints (no trailing newline)."""
    try:
        dist: metadata.Distribution | None = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        dist = None
    lines = [f"Release Version: {dist.version if dist else UNKNOWN}"]
    commit = _commit(dist)
    if commit:
        lines.append(f"Git Commit Hash: {commit}")
    lines += [
        f"Build TS: {_built(dist)}",
        f"Python Version: {platform.python_version()}",
        f"Python OS/Arch: {sys.platform}/{platform.machine()}",
    ]
    return "\n".join(lines)


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    """``-V``/``--version`` on a plain argparse parser: print ``version_text()``, exit 0."""
    parser.add_argument(*FLAGS, action=_VersionAction, nargs=0, help="print the version and exit")


class _VersionAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_text(), flush=True)
        parser.exit(0)


def _commit(dist: metadata.Distribution | None) -> str:
    text = dist.read_text("direct_url.json") if dist else None
    if not text:
        return ""
    try:
        info = json.loads(text)
        return str(info.get("vcs_info", {}).get("commit_id", ""))
    except (ValueError, AttributeError):
        return ""


def _built(dist: metadata.Distribution | None) -> str:
    if dist is None:
        return UNKNOWN
    files = [f for f in dist.files or () if f.name == "METADATA"]
    try:
        stamp = os.stat(files[0].locate()).st_mtime if files else None
    except OSError:
        stamp = None
    if stamp is None:
        return UNKNOWN
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S")
