"""The drainer's ``savepoint`` file written by ``generate_meta``.

Format (TOML, read by a drainer's first start as its initial checkpoint)::

    commitTS = 449812345678901249
    # UTC:   2024-05-16 12:27:19.742 +00:00
    # local: 2024-05-16 20:27:19.742 +08:00

tidb-binlog writes the two times as bare lines, which is not valid TOML; here they
are comments. Invariant: the file is replaced atomically (temporary file, fsync,
rename), so a reader sees the old savepoint or the new one, never a torn one.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, tzinfo
from pathlib import Path

from services.binlogctl.render import format_ts

SAVEPOINT = "savepoint"


def savepoint_text(commit_ts: int, local: tzinfo | None = None, label: str = "local") -> str:
    """The file's content; ``local`` is the zone of the second time (default: this host's,
    ``binlogctl --time-zone`` names another), ``label`` its name in the comment."""
    return (
        f"commitTS = {commit_ts}\n"
        f"# UTC:   {format_ts(commit_ts, UTC)}\n"
        f"# {label}: {format_ts(commit_ts, local)}\n"
    )


def write_savepoint(data_dir: Path, text: str) -> Path:
    """Write ``<data_dir>/savepoint`` atomically (creating ``data_dir`` 0700); its path."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / SAVEPOINT
    fd, tmp = tempfile.mkstemp(prefix=f".{SAVEPOINT}.", dir=data_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
