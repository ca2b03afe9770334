"""TLS contexts for gRPC (grpclib) and HTTP (aiohttp) from ``SecuritySettings``, and CN checks.

Server: TLS when ``ssl-cert``/``ssl-key`` are set; with ``ssl-ca`` the handshake requires a
client certificate chaining to that CA (mutual TLS). Client: verifies the server against
``ssl-ca`` (or the system store) and presents ``ssl-cert`` when set. ALPN must offer ``h2`` for
grpclib and ``http/1.1`` for aiohttp.

``cert-allowed-cn``: Go's tidb-binlog rejects a disallowed client certificate inside the
handshake (``VerifyPeerCertificate``). Python's ``ssl`` has no such hook (``sni_callback`` runs
before the client certificate arrives), so the CN is checked right after the handshake, on every
request, from the verified peer certificate: the gRPC server answers ``UNAUTHENTICATED``
(``telemetry.grpcauth``) and the ops HTTP server ``403`` (``telemetry.http``). Invariant: with
allowed CNs configured, no handler runs for a peer whose verified certificate has no allowed CN.

Both contexts follow their files (``telemetry.tlsreload``): rotated certificates, keys and CAs
apply to the next handshake, without a restart.
"""

from __future__ import annotations

import ssl
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from tributary.errors import TributaryError
from tributary.settings.security import SecuritySettings
from tributary.telemetry.tlsreload import ReloadingContext

ALPN_GRPC = ("h2",)
ALPN_HTTP = ("http/1.1",)
ALPN_ONE_PORT = ALPN_GRPC + ALPN_HTTP  # gRPC and the HTTP API on one port (telemetry.oneport)

PeerCert = Mapping[str, Any]
"""A certificate as returned by ``SSLSocket.getpeercert()``."""


class TlsError(TributaryError):
    """TLS material that cannot be used (missing, unreadable, mismatched); not retriable."""


def server_context(
    security: SecuritySettings, *, alpn: Sequence[str] = ALPN_GRPC
) -> ssl.SSLContext | None:
    """The server context, or None when TLS is off. It follows its files
    (``telemetry.tlsreload``): a handshake uses what they hold when it starts."""
    if not security.tls_enabled:
        return None
    if not (security.ssl_cert and security.ssl_key):
        raise TlsError("a TLS server needs ssl-cert and ssl-key")

    def build(ctx: ssl.SSLContext) -> None:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.options |= ssl.OP_NO_COMPRESSION  # required by HTTP/2 (RFC 7540 9.2.1)
        _load_chain(ctx, security)
        if security.ssl_ca:
            _load_ca(ctx, security.ssl_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.set_alpn_protocols(list(alpn))

    return ReloadingContext(ssl.PROTOCOL_TLS_SERVER, build, _files(security))


def client_context(
    security: SecuritySettings, *, alpn: Sequence[str] = ALPN_GRPC, check_hostname: bool = True
) -> ssl.SSLContext | None:
    """The client context, or None when TLS is off; it follows its files as the server's does.

    ``check_hostname=False`` still verifies the chain but not the name in the certificate.
    """
    if not security.tls_enabled:
        return None

    def build(ctx: ssl.SSLContext) -> None:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.options |= ssl.OP_NO_COMPRESSION
        if security.ssl_ca:
            _load_ca(ctx, security.ssl_ca)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        ctx.check_hostname = check_hostname
        if security.ssl_cert:
            _load_chain(ctx, security)
        ctx.set_alpn_protocols(list(alpn))

    return ReloadingContext(ssl.PROTOCOL_TLS_CLIENT, build, _files(security))


def _files(security: SecuritySettings) -> tuple[str, ...]:
    return tuple(f for f in (security.ssl_ca, security.ssl_cert, security.ssl_key) if f)


def _load_chain(ctx: ssl.SSLContext, security: SecuritySettings) -> None:
    try:
        ctx.load_cert_chain(security.ssl_cert, security.ssl_key)
    except (OSError, ssl.SSLError) as e:
        raise TlsError(
            f"cannot load ssl-cert {security.ssl_cert!r} / ssl-key {security.ssl_key!r}: {e}"
        ) from e


def _load_ca(ctx: ssl.SSLContext, path: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as e:
        raise TlsError(f"cannot load ssl-ca {path!r}: {e}") from e


def common_names(cert: PeerCert | None) -> tuple[str, ...]:
    """The subject Common Names of a ``getpeercert()`` dict (empty without a certificate).

    ``{"subject": ((("commonName", "drainer"),),)}`` -> ``("drainer",)``.
    """
    if not cert:
        return ()
    return tuple(
        value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"
    )


def cn_allowed(cert: PeerCert | None, allowed: Collection[str]) -> bool:
    """True when ``allowed`` is empty or the certificate carries one of its Common Names."""
    if not allowed:
        return True
    return any(name in allowed for name in common_names(cert))
