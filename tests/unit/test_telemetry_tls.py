"""SSL contexts from SecuritySettings, and the Common Name checks."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from tests.support.certs import make_ca
from tributary.settings import SecuritySettings
from tributary.telemetry.tls import (
    ALPN_HTTP,
    TlsError,
    client_context,
    cn_allowed,
    common_names,
    server_context,
)

DRAINER = {"subject": ((("countryName", "US"),), (("commonName", "drainer"),))}


def test_common_names_from_getpeercert_dict() -> None:
    assert common_names(DRAINER) == ("drainer",)
    assert common_names(None) == ()
    assert common_names({}) == ()


def test_cn_allowed() -> None:
    assert cn_allowed(DRAINER, {"drainer", "binlogctl"})
    assert not cn_allowed(DRAINER, {"pump"})
    assert not cn_allowed(None, {"pump"})
    assert cn_allowed(None, ())  # no allow list: anything the handshake accepted


def test_tls_off_without_material() -> None:
    assert server_context(SecuritySettings()) is None
    assert client_context(SecuritySettings()) is None


def test_contexts_for_mutual_tls(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    security = ca.security(ca.issue("pump"))
    server = server_context(security)
    assert server is not None
    assert server.verify_mode == ssl.CERT_REQUIRED
    assert server.minimum_version == ssl.TLSVersion.TLSv1_2
    client = client_context(security, alpn=ALPN_HTTP, check_hostname=False)
    assert client is not None
    assert client.verify_mode == ssl.CERT_REQUIRED and not client.check_hostname


def test_server_without_ca_does_not_ask_for_client_certs(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    leaf = ca.issue("pump")
    server = server_context(SecuritySettings(ssl_cert=str(leaf.cert), ssl_key=str(leaf.key)))
    assert server is not None and server.verify_mode == ssl.CERT_NONE


def test_unusable_material_is_a_tls_error(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    pump, other = ca.issue("pump"), ca.issue("other")
    with pytest.raises(TlsError, match="needs ssl-cert and ssl-key"):
        server_context(SecuritySettings(ssl_ca=str(ca.cert)))
    mismatched = SecuritySettings(str(ca.cert), str(pump.cert), str(other.key))
    with pytest.raises(TlsError, match="cannot load ssl-cert") as err:
        server_context(mismatched)
    assert isinstance(err.value.__cause__, ssl.SSLError)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(TlsError, match="cannot load ssl-ca"):
        client_context(SecuritySettings(ssl_ca=str(garbage)))
