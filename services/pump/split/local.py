"""Local sockets between a pump's processes: Linux abstract unix names, nothing on disk.

A name is ``\\0tributary-pump-<writer pid>-<random>-<purpose>``: unique while the writer lives, gone
with it (no stale file for a restarted pump to trip over), and reachable only from this host.
uvloop cannot connect to an abstract name by path, so connections are made on a socket of our
own (``connect_local``) and handed to the loop; ``LocalChannel`` does this for grpclib.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket

from grpclib.client import Channel
from grpclib.protocol import H2Protocol


def local_names(*purposes: str) -> dict[str, str]:
    """A fresh name per purpose for one pump (two pumps may share a process in tests)."""
    token = f"{os.getpid()}-{secrets.token_hex(4)}"
    return {p: f"\0tributary-pump-{token}-{p}" for p in purposes}


def listen_local(name: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(name)
    return sock


def connect_local(name: str) -> socket.socket:
    """A connected, non-blocking socket (a local connect does not wait)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(name)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def handed_over(sock: socket.socket, transport: asyncio.BaseTransport) -> None:
    """After ``create_unix_connection(sock=sock)``: uvloop works on a duplicate of the
    descriptor and leaves ``sock`` to us, asyncio's own loop owns ``sock`` itself."""
    inner = transport.get_extra_info("socket")
    if inner is None or inner.fileno() != sock.fileno():
        sock.close()


class LocalChannel(Channel):
    """A grpclib channel to a server listening on a local name."""

    def __init__(self, name: str) -> None:
        super().__init__(path=name)
        self._name = name

    async def _create_connection(self) -> H2Protocol:
        sock = connect_local(self._name)
        transport, protocol = await self._loop.create_unix_connection(
            self._protocol_factory, sock=sock
        )
        handed_over(sock, transport)
        return protocol
