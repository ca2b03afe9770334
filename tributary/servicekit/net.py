"""Listening sockets for gRPC servers, the address a node advertises, and where a node's HTTP
ops API lives.

Invariants: the HTTP API is always served on the gRPC port (``servicekit.serving``), so the
address in a node's registry record is its HTTP API's too, the rule tidb-binlog's ``binlogctl``
relies on; ``status-addr`` only adds a listener of its own. An advertised address is never a
wildcard: without ``advertise-addr`` it is the listen host, or, when that is a wildcard, the
machine's first non-loopback IPv4 address (tidb-binlog's ``DefaultIP``, 127.0.0.1 when there
is none).
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

from tributary.net import split_host_port

WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})
_SIOCGIFADDR = 0x8915  # Linux: an interface's (primary) IPv4 address


def bind(addr: str, *, reuse_port: bool = False) -> socket.socket:
    """A bound (not yet listening) TCP socket for ``host:port``; port 0 picks one.

    ``reuse_port``: ``SO_REUSEPORT``, so other processes of this user may bind the same port
    and the kernel spreads its connections over those that listen."""
    host, port = split_host_port(addr)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio enables TCP_NODELAY only on sockets that
    # say so, and without it every small RPC waits for delayed ACKs (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()  # a port in use must not leave an open socket to the garbage collector
        raise
    return sock


def status_addr(grpc_addr: str, configured: str) -> tuple[str, int]:
    """Where the HTTP API listens: ``configured`` if set, else the gRPC address itself."""
    return split_host_port(configured or grpc_addr)


def advertise_for(addr: str, configured: str, port: int) -> str:
    """``configured`` if set, else the host of ``addr`` (or ``default_ip()`` for a wildcard)
    with the bound ``port``."""
    if configured:
        return configured
    host, _ = split_host_port(addr)
    if host in WILDCARDS:
        host = default_ip()
    return f"{host}:{port}"


def default_ip() -> str:
    """The first non-loopback IPv4 address of this machine's interfaces, in interface order;
    else one its host name resolves to; else ``127.0.0.1``."""
    for _, name in socket.if_nameindex():
        ip = _interface_ipv4(name)
        if ip is not None and _usable(ip):
            return ip
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        infos = []
    for *_, sockaddr in infos:
        if _usable(str(sockaddr[0])):
            return str(sockaddr[0])
    return "127.0.0.1"


def _interface_ipv4(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:  # no IPv4 address on it (or not Linux)
            return None
    return socket.inet_ntoa(packed[20:24])


def _usable(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    return not (address.is_loopback or address.is_unspecified)
