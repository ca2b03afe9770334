"""Network addresses as text: the one ``host:port`` parser and its inverse.

``split_host_port("10.0.0.5:8250") == ("10.0.0.5", 8250)``; an IPv6 host goes in brackets
(``"[fd00::5]:8250"`` -> ``("fd00::5", 8250)``) and ``join_host_port`` puts them back. An empty
host (``":8250"``) means every interface. A missing port is an error unless the caller names a
default (etcd endpoints default to 2379).

Invariant: every malformed address raises ``AddressError`` (a ``ValueError``) whose message
quotes the address and says what is wrong with it; an unbracketed IPv6 address is refused
rather than guessed at (``"::1:8250"`` could be ``[::1]:8250`` or ``[::1:8250]``).
"""

from __future__ import annotations

from tributary.errors import TributaryError

MAX_PORT = 65535


class AddressError(TributaryError, ValueError):
    """A ``host:port`` string that cannot be used; never retriable."""


def split_host_port(addr: str, *, default_port: int | None = None) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> ``(host, port)``, the host without brackets.

    Without a port, ``default_port`` if given, else AddressError."""
    if addr.startswith("["):
        host, sep, rest = addr[1:].partition("]")
        if not sep:
            raise AddressError(f"missing ']' in {addr!r}; want [ipv6-host]:port")
        if rest and not rest.startswith(":"):
            raise AddressError(f"expected ':port' after ']' in {addr!r}")
        port_text: str | None = rest[1:] if rest else None
    else:
        host, sep, port_text = addr.rpartition(":")
        if not sep:
            host, port_text = addr, None
        elif ":" in host:
            raise AddressError(f"put an IPv6 host in brackets ('[::1]:8250'), got {addr!r}")
    if port_text is None:
        if default_port is None:
            raise AddressError(f"expected host:port, got {addr!r} (no port)")
        return host, default_port
    return host, _port(port_text, addr)


def join_host_port(host: str, port: int) -> str:
    """``("fd00::5", 8250)`` -> ``"[fd00::5]:8250"``; other hosts as they are."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_endpoint(
    endpoint: str, *, schemes: tuple[str, ...] | None = None, default_port: int | None = None
) -> tuple[str, int]:
    """``[scheme://]host[:port][/]`` -> ``(host, port)``; the scheme, if any, must be one of
    ``schemes`` (None: any scheme)."""
    want = f"[{'|'.join(schemes) if schemes else 'scheme'}://]host:port"
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        rest = endpoint
    elif schemes is not None and scheme.lower() not in schemes:
        raise AddressError(f"expected {want}, got {endpoint!r}")
    rest = rest.removesuffix("/")
    if not rest or "/" in rest:
        raise AddressError(f"expected {want}, got {endpoint!r}")
    host, port = split_host_port(rest, default_port=default_port)
    if not host:
        raise AddressError(f"no host in {endpoint!r}")
    return host, port


def _port(text: str, addr: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_PORT:
        raise AddressError(f"bad port {text!r} in {addr!r}: want a number in 0..{MAX_PORT}")
    return int(text)
