"""The operator's HTTPS client context comes from the cluster's TLS Secret: it trusts the
Secret's CA and presents its certificate, so a pump serving mutual TLS accepts the close."""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from binlog_operator.pumps import AddressFile, HttpCloser, Target
from binlog_operator.scaledown import ScaleDownError
from binlog_operator.tlsctx import context_from_secret
from tests.support.certs import Pki, make_ca, make_pki
from tributary.telemetry.http import OpsServer
from tributary.telemetry.tls import ALPN_HTTP, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("binlog-operator",))


def secret(ca: Path, cert: Path, key: Path) -> dict[str, Any]:
    """A ``kubernetes.io/tls``-style Secret as the API returns it (base64 data)."""
    files = {"ca.crt": ca, "tls.crt": cert, "tls.key": key}
    data = {k: base64.b64encode(p.read_bytes()).decode() for k, p in files.items()}
    return {"metadata": {"name": "c-tls"}, "type": "kubernetes.io/tls", "data": data}


class Closes:
    def __init__(self) -> None:
        self.peers: list[str] = []

    async def close(self, request: web.Request) -> web.Response:
        cert = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(rdn[0] for rdn in (cert or {}).get("subject", ()))
        self.peers.append(f"{request.match_info['node']} by {subject.get('commonName')}")
        return web.json_response({"message": "closing"})


async def test_a_close_over_mutual_tls_with_the_secrets_ca_and_client_cert(
    pki: Pki, tmp_path: Path
) -> None:
    leaf = pki.clients["binlog-operator"]
    ctx = context_from_secret(secret(pki.ca.cert, leaf.cert, leaf.key))
    closes = Closes()
    server_ctx = server_context(pki.server_security(), alpn=ALPN_HTTP)  # requires a client cert
    routes = [web.put("/state/{node}/close", closes.close)]
    async with OpsServer("127.0.0.1", 0, routes, ssl_context=server_ctx) as server:
        addresses = tmp_path / "pods.json"
        addresses.write_text(f'{{"ns/c-pump-1": "127.0.0.1:{server.port}"}}')
        async with aiohttp.ClientSession() as session:
            closer = HttpCloser(session, AddressFile(addresses), Target("ns", "c-pump", 1, ctx))
            assert closer.url("c-pump-1").startswith("https://127.0.0.1:")
            await closer.close("c-pump-1")
            # the same Secret's CA does not vouch for a server of another CA
            other = make_ca(tmp_path / "other", name="other-ca")
            leaf2 = other.issue("operator")
            foreign = context_from_secret(secret(other.cert, leaf2.cert, leaf2.key))
            closer = HttpCloser(session, AddressFile(addresses), Target("ns", "c-pump", 1, foreign))
            with pytest.raises(ScaleDownError, match=r"c-pump-1 unreachable.*CERTIFICATE_VERIFY"):
                await closer.close("c-pump-1")
    assert closes.peers == ["c-pump-1 by binlog-operator"]


def test_the_key_material_leaves_no_file_behind(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaf = pki.clients["binlog-operator"]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    context_from_secret(secret(pki.ca.cert, leaf.cert, leaf.key))
    assert list(tmp_path.iterdir()) == []


def test_an_unusable_secret_says_what_is_wrong(pki: Pki) -> None:
    leaf = pki.clients["binlog-operator"]
    good = secret(pki.ca.cert, leaf.cert, leaf.key)
    lacking = {**good, "data": {k: v for k, v in good["data"].items() if k != "tls.key"}}
    with pytest.raises(ScaleDownError, match=r"TLS secret c-tls lacks tls\.key"):
        context_from_secret(lacking)
    mismatched = {**good, "data": {**good["data"], "tls.key": good["data"]["ca.crt"]}}
    with pytest.raises(ScaleDownError, match="unusable certificate or key"):
        context_from_secret(mismatched)
    garbled = {**good, "data": {**good["data"], "ca.crt": "not base64!"}}
    with pytest.raises(ScaleDownError, match="not base64"):
        context_from_secret(garbled)
