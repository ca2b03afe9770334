"""The offline marker: a pump or drainer taken offline stays offline across restarts.

A pump closed by an operator (``PUT /state/<id>/close``, binlogctl, the Kubernetes operator's
scale-down) exits once every drainer has consumed its binlogs and records ``offline``; a drainer
closed the same way (binlogctl's ``offline-drainer``, the operator removing it or its
BinlogCluster) applies what it merged and records ``offline``. Under a supervisor that restarts
the process (the kubelet restarts a pod's container until its StatefulSet is scaled down or
deleted), a plain restart would register the node ``online`` again: a pump would make drainers
wait for it, and a drainer would be left ``paused`` rather than ``offline`` when its pod goes,
holding every pump from going offline. So after recording ``offline`` the process writes
``<data-dir>/OFFLINE``, and ``check_marker`` refuses to start while that file is there, unless
started with ``--rejoin`` (``rejoin = true``, ``PUMP_REJOIN=true``/``DRAINER_REJOIN=true``),
which removes the marker and rejoins with the same data.

Invariant: the marker is written only after the registry says ``offline``, and a data directory
holding it never registers ``online`` without ``rejoin``.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path

from tributary.errors import TributaryError

log = logging.getLogger(__name__)

MARKER = "OFFLINE"


class OfflineMarked(TributaryError):
    """This data directory's pump or drainer was taken offline; it does not rejoin on its own."""


def write_marker(data_dir: Path, node_id: str, now: datetime | None = None) -> None:
    """Leave the marker (atomically: a crash leaves either no marker or a whole one)."""
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    body = json.dumps({"node_id": node_id, "offline_at": when}).encode()
    tmp = data_dir / f"{MARKER}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, data_dir / MARKER)


def check_marker(data_dir: Path, rejoin: bool, what: str = "pump") -> None:
    """Refuse to start (OfflineMarked) while the marker is there, unless ``rejoin``, which
    removes it."""
    marker = data_dir / MARKER
    if not marker.exists():
        return
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        info = {}
    node = info.get("node_id", "?") if isinstance(info, dict) else "?"
    when = info.get("offline_at", "?") if isinstance(info, dict) else "?"
    if rejoin:
        log.warning(
            "%s %s was taken offline at %s; rejoining as asked (--rejoin)", what, node, when
        )
        marker.unlink()
        return
    message = (
        f"{what} {node} was taken offline at {when} ({marker} exists) and does not rejoin on "
        f"its own. To rejoin with this data, start it once with --rejoin (or rejoin = true in "
        f"the config, {what.upper()}_REJOIN=true); to start a new {what}, use an empty data "
        "directory."
    )
    log.error("%s", message)
    raise OfflineMarked(message)
