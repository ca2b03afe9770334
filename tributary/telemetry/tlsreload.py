"""An ``ssl.SSLContext`` that follows its certificate files: every new handshake uses what the
files hold at that moment, so a rotated certificate, key or CA takes effect without a restart.

A Kubernetes Secret volume is updated in place: the kubelet writes the new files into a fresh
directory and swaps the ``..data`` symlink, so each path resolves to a new inode at once. Before
each handshake (asyncio and uvloop call ``wrap_bio`` once per connection, server and client side
alike) ``ReloadingContext`` compares the files' identity (device, inode, size, mtime) with what
it last loaded, builds a fresh context when they differ, and hands the handshake to the newest
context that loaded. A fresh context is built from nothing, so a CA dropped from ``ssl-ca`` is
no longer trusted (``load_verify_locations`` on a live context could only add).

Invariants: a handshake never uses a half-loaded context (the new one replaces the old only
once built); files that do not load (a certificate and a key of two different updates, a
missing file) leave the previous context in use and are reported once, and the next change of
the files is tried again; connections already established keep their session; ALPN protocols
set on the context after it was built (``set_alpn_protocols``) apply to every generation.

Worked example, ``ssl-ca`` rotated in three Secret updates (A = old CA, B = new):

    files: ca A,    cert A  -> generation 0: trusts A, presents A
    files: ca A+B,  cert A  -> generation 1: trusts A and B, presents A
    files: ca A+B,  cert B  -> generation 2: trusts A and B, presents B
    files: ca B,    cert B  -> generation 3: trusts B only; a peer with A's certificate is
                               refused at its next handshake
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tributary.errors import TributaryError

log = logging.getLogger(__name__)

Fingerprint = tuple[tuple[int, int, int, int] | None, ...]
Build = Callable[[ssl.SSLContext], None]
"""Configures a fresh context from the files (raises ``TlsError`` when they do not load)."""


def fingerprint(paths: Sequence[str]) -> Fingerprint:
    """Each file's (device, inode, size, mtime in ns), None for one that cannot be read."""
    found: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(found)


class ReloadingContext(ssl.SSLContext):
    """A context configured by ``build`` from ``files``, rebuilt when the files change.

    Generation 0 is this object itself (configured by ``build`` at construction, so it can be
    used anywhere a context is read); later generations are plain contexts it hands the
    handshakes to.
    """

    def __new__(
        cls, protocol: ssl._SSLMethod, build: Build, files: Sequence[str]
    ) -> ReloadingContext:
        return super().__new__(cls, protocol)

    def __init__(self, protocol: ssl._SSLMethod, build: Build, files: Sequence[str]) -> None:
        self._reload_protocol = protocol
        self._reload_build = build
        self._reload_files = tuple(files)
        self._reload_alpn: list[str] | None = None
        self._reload_seen = fingerprint(self._reload_files)  # before loading: a change during
        build(self)  # the load is seen at the next handshake; raises TlsError if unusable
        self._reload_current: ssl.SSLContext = self
        self.generation = 0

    def latest(self) -> ssl.SSLContext:
        """The context for a new handshake: rebuilt first if the files changed."""
        now = fingerprint(self._reload_files)
        if now != self._reload_seen:
            self._reload_seen = now
            self._reload()
        return self._reload_current

    def _reload(self) -> None:
        fresh = ssl.SSLContext(self._reload_protocol)
        try:
            self._reload_build(fresh)
        except (TributaryError, ssl.SSLError, OSError) as e:  # TlsError: files that do not load
            log.warning(
                "TLS files %s changed but do not load (still using generation %d): %s",
                ", ".join(self._reload_files),
                self.generation,
                e,
            )
            return
        if self._reload_alpn is not None:
            fresh.set_alpn_protocols(self._reload_alpn)
        self._reload_current = fresh
        self.generation += 1
        cas = sorted(_subject(c) for c in fresh.get_ca_certs())
        log.info(
            "TLS files %s reloaded (generation %d; trusted CAs: %s)",
            ", ".join(self._reload_files),
            self.generation,
            "; ".join(cas) or "none",
        )

    def set_alpn_protocols(self, alpn_protocols: Iterable[str]) -> None:
        """Set on this context and on every later generation (a caller may set ALPN after
        ``build``, as the pump client does)."""
        protocols = list(alpn_protocols)
        self._reload_alpn = protocols
        super().set_alpn_protocols(protocols)
        if getattr(self, "_reload_current", self) is not self:
            self._reload_current.set_alpn_protocols(protocols)

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        current = self.latest()
        wrap = super().wrap_bio if current is self else current.wrap_bio
        return wrap(
            incoming,
            outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
            session=session,
        )

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        current = self.latest()
        wrap = super().wrap_socket if current is self else current.wrap_socket
        return wrap(
            sock,
            server_side=server_side,
            do_handshake_on_connect=do_handshake_on_connect,
            suppress_ragged_eofs=suppress_ragged_eofs,
            server_hostname=server_hostname,
            session=session,
        )


def _subject(cert: dict[str, Any]) -> str:
    """``CN=...`` of a ``get_ca_certs()`` entry (its whole subject if it has no CN)."""
    pairs = [f"{k}={v}" for rdn in cert.get("subject", ()) for k, v in rdn]
    names = [p for p in pairs if p.startswith("commonName=")]
    return ",".join(names or pairs).replace("commonName=", "CN=")
