"""Listening sockets for gRPC servers, and where a node's HTTP ops API lives.

Invariant: the status address defaults to the gRPC port + 1, the rule
``binlogctl`` relies on to find a node's HTTP API from its registry record.
"""

from __future__ import annotations

import socket

from tributary.net import split_host_port


def bind(addr: str) -> socket.socket:
    """A bound (not yet listening) TCP socket for ``host:port``; port 0 picks one."""
    host, port = split_host_port(addr)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio enables TCP_NODELAY only on sockets that
    # say so, and without it every small RPC waits for delayed ACKs (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def status_addr(grpc_addr: str, configured: str) -> tuple[str, int]:
    """``configured`` if set, else the gRPC host with the next port (any port if 0)."""
    if configured:
        return split_host_port(configured)
    host, port = split_host_port(grpc_addr)
    return host, (port + 1 if port else 0)
