"""Node identity and exclusive ownership of a service's data directory.

Invariant: one process at a time owns a data directory (``.lock`` is flock'ed
for the process's lifetime, so two pumps never share a value log and two
drainers never share a checkpoint), and a node keeps its id across restarts:
it is read from ``<data-dir>/.node``, else taken from configuration, else made
from ``hostname:port``, and then written back. A stable id matters: pumps wait
for every non-offline drainer record, so a node that came back under a new id
would leave a stale record behind.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tributary.errors import TributaryError
from tributary.servicekit.net import advertise_for, bind


class DataDirBusy(TributaryError):
    """Another process holds the data directory."""


def resolve_node_id(data_dir: Path, configured: str, port: int) -> str:
    """The node id this data directory belongs to (created on first use)."""
    path = data_dir / ".node"
    if path.exists():
        stored = path.read_text().strip()
        if stored:
            return stored
    node_id = configured or f"{socket.gethostname()}:{port}"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(node_id + "\n")
    os.replace(tmp, path)
    return node_id


class DirLock:
    """An exclusive, non-blocking flock on ``<data-dir>/.lock``."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / ".lock"
        self._fd: int | None = None

    def __enter__(self) -> DirLock:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirBusy(
                f"data directory {self._path.parent} is used by another process"
            ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


@dataclass(frozen=True)
class ClaimedNode:
    """A node's identity and its bound gRPC socket, held for the process's life."""

    node_id: str
    sock: socket.socket
    grpc_port: int
    advertise: str


@asynccontextmanager
async def claim_node(
    data_dir: Path, addr: str, advertise_addr: str, configured_id: str, *, reuse_port: bool = False
) -> AsyncIterator[ClaimedNode]:
    """Bind ``addr`` (to learn the real port), lock ``data_dir`` and resolve the
    node id and the advertised address (``advertise_for``: an empty ``advertise_addr`` is
    derived); the socket closes and the lock is released on exit. ``reuse_port``: bound with
    ``SO_REUSEPORT`` for other processes (a pump's fronts) to listen on the same port."""
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    sock = bind(addr, reuse_port=reuse_port)
    grpc_port = sock.getsockname()[1]
    advertise = advertise_for(addr, advertise_addr, grpc_port)
    with sock, DirLock(data_dir):
        node_id = resolve_node_id(data_dir, configured_id, grpc_port)
        yield ClaimedNode(node_id, sock, grpc_port, advertise)
