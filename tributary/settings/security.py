"""``[security]``: the TLS settings every service shares (tidb-binlog's key names).

TLS is on when a certificate or a CA is configured; setting ``ssl-ca`` makes it mutual (peers
must present a certificate signed by that CA) and ``cert-allowed-cn`` further restricts which
client certificates a server accepts. Invariant: settings that pass ``validate`` are internally
consistent (cert and key together, allowed CNs only with a CA, named files exist); building the
``ssl.SSLContext`` objects is ``telemetry.tls``'s job.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from tributary.settings.model import setting


@dataclass(frozen=True)
class SecuritySettings:
    """TLS material and client-certificate policy."""

    ssl_ca: str = setting(
        "",
        "path of the CA certificate (PEM) peers must chain to; setting it enables mutual TLS",
    )
    ssl_cert: str = setting("", "path of this node's certificate chain (PEM)")
    ssl_key: str = setting("", "path of this node's private key (PEM)")
    cert_allowed_cn: tuple[str, ...] = setting(
        (),
        "Common Names accepted in client certificates; empty accepts any cert signed by ssl-ca",
    )

    @property
    def tls_enabled(self) -> bool:
        return bool(self.ssl_cert or self.ssl_ca)

    def validate(self) -> Iterator[tuple[str, str]]:
        if self.ssl_cert and not self.ssl_key:
            yield "ssl-key", "required when ssl-cert is set"
        if self.ssl_key and not self.ssl_cert:
            yield "ssl-cert", "required when ssl-key is set"
        if self.cert_allowed_cn and not self.ssl_ca:
            yield "cert-allowed-cn", "needs ssl-ca (client certificates are requested only then)"
        for key, path in (
            ("ssl-ca", self.ssl_ca),
            ("ssl-cert", self.ssl_cert),
            ("ssl-key", self.ssl_key),
        ):
            if path and not os.path.isfile(path):
                yield key, f"no such file: {path}"
