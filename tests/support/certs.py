"""Throwaway X.509 material for TLS tests, made with the ``openssl`` command-line tool.

``make_ca(dir)`` creates a self-signed CA; ``ca.issue(cn)`` a leaf certificate (EC P-256) valid
for both server and client use, with subjectAltName ``127.0.0.1`` and ``localhost`` so clients
can verify a loopback server's name. Everything lives under the given directory.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tributary.settings.security import SecuritySettings

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


@dataclass(frozen=True)
class Leaf:
    cn: str
    cert: Path
    key: Path


@dataclass(frozen=True)
class CertAuthority:
    directory: Path
    cert: Path
    key: Path

    def issue(self, cn: str, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> Leaf:
        """A certificate with subject ``CN=cn`` signed by this CA."""
        base = self.directory / cn
        key, csr, cert, ext = (base.with_suffix(s) for s in (".key", ".csr", ".pem", ".ext"))
        sans = ",".join(f"IP:{h}" if h[0].isdigit() else f"DNS:{h}" for h in hosts)
        ext.write_text(
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth,clientAuth\n"
            "subjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid\n"
            f"subjectAltName={sans}\n"
        )
        _openssl("req", "-new", *_EC, "-keyout", key, "-out", csr, "-subj", f"/CN={cn}")
        _openssl(
            "x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key,
            "-CAcreateserial", "-days", "2", "-out", cert, "-extfile", ext,
        )  # fmt: skip
        return Leaf(cn, cert, key)

    def security(self, leaf: Leaf, allowed_cn: Sequence[str] = ()) -> SecuritySettings:
        """``SecuritySettings`` using this CA and ``leaf`` as the node's own certificate."""
        return SecuritySettings(str(self.cert), str(leaf.cert), str(leaf.key), tuple(allowed_cn))


def make_ca(directory: Path, name: str = "tributary-test-ca") -> CertAuthority:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "ca.pem", directory / "ca.key"
    _openssl(
        "req", "-x509", "-new", *_EC, "-keyout", key, "-out", cert, "-days", "2",
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return CertAuthority(directory, cert, key)


@dataclass(frozen=True)
class Pki:
    """A CA with a server certificate and client certificates, plus a foreign CA's client."""

    ca: CertAuthority
    server: Leaf
    clients: dict[str, Leaf]
    foreign: Leaf

    def server_security(self, allowed_cn: Sequence[str] = ()) -> SecuritySettings:
        return self.ca.security(self.server, allowed_cn)

    def client_security(self, name: str | None) -> SecuritySettings:
        """Trusts our CA; presents client ``name`` ("foreign": the other CA's; None: none)."""
        if name is None:
            return SecuritySettings(ssl_ca=str(self.ca.cert))
        return self.ca.security(self.foreign if name == "foreign" else self.clients[name])


def make_pki(directory: Path, clients: Sequence[str] = ("drainer", "intruder")) -> Pki:
    ca = make_ca(directory / "ca")
    foreign = make_ca(directory / "foreign", name="foreign-ca").issue("drainer")
    return Pki(ca, ca.issue("pump"), {name: ca.issue(name) for name in clients}, foreign)
