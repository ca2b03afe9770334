"""PumpsClient over TLS to a scripted pump peer, with a throwaway CA made by
the openssl command-line tool."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from tests.support.scripted_pump import ScriptedPump
from tributary.coord.memory import MemoryKv
from tributary.pumpclient import PumpClientError, PumpsClient
from tributary.registry.status import NodeKind, node_key

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 signed by it."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
             "-subj", "/CN=tributary-test-ca", cwd=d)  # fmt: skip
    _openssl("req", *ec, "-keyout", "pump.key", "-out", "pump.csr", "-subj", "/CN=pump", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "pump.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "pump.crt", "-days", "1", "-extfile", "san.ext",
             cwd=d)  # fmt: skip
    return d / "ca.crt", d / "pump.crt", d / "pump.key"


async def test_writes_over_tls(tmp_path: Path) -> None:
    ca, cert, key = make_certs(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server_ctx.set_alpn_protocols(["h2"])
    peer = ScriptedPump("a")
    await peer.start(server_ctx)
    try:
        kv = MemoryKv()
        await kv.put(node_key(NodeKind.PUMP, "a"), peer.record().to_json())
        client_ctx = ssl.create_default_context(cafile=str(ca))
        async with PumpsClient(kv, 3, ssl_context=client_ctx) as client:
            await client.prewrite(1, b"secret")
            await client.commit(1, 2)
        untrusting = ssl.create_default_context()  # system CAs only: handshake fails
        async with PumpsClient(kv, 3, ssl_context=untrusting, write_timeout=0.2) as client:
            with pytest.raises(PumpClientError, match="write binlog failed"):
                await client.prewrite(3, b"v")
    finally:
        await peer.stop()
    assert [(h.start_ts, h.commit_ts) for h in peer.binlogs()] == [(1, 0), (1, 2)]
