"""``python -m servicekit.probe``: the exec probe a TLS pod runs against its own HTTP API.

A real ops server with mutual TLS (client certificates required, as a pump or drainer with the
cluster's Secret serves): the probe, given a directory laid out like the mounted Secret
(``ca.crt``, ``tls.crt``, ``tls.key``), passes on 200 and fails on 503 (not ready), while a
plain HTTP client and a probe without certificates are refused. A closed port fails too.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.certs import Leaf, Pki, make_pki
from tests.support.net import free_port
from tributary.telemetry.http import OpsServer
from tributary.telemetry.tls import ALPN_HTTP, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def secret_dir(pki: Pki, leaf: Leaf, where: Path) -> Path:
    """The files as the Secret mount shows them."""
    where.mkdir()
    shutil.copy(pki.ca.cert, where / "ca.crt")
    shutil.copy(leaf.cert, where / "tls.crt")
    shutil.copy(leaf.key, where / "tls.key")
    return where


async def probe(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "tributary.servicekit.probe", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_the_probe_passes_on_ready_and_fails_otherwise(pki: Pki, tmp_path: Path) -> None:
    ready = False
    ctx = server_context(pki.server_security(), alpn=ALPN_HTTP)
    tls = str(secret_dir(pki, pki.server, tmp_path / "tls"))  # the pod's own certificate
    async with OpsServer("127.0.0.1", 0, [], ssl_context=ctx, ready_fn=lambda: ready) as server:
        base = server.url
        assert base.startswith("https://")
        code, said = await probe(f"{base}/ready", "--tls-dir", tls)
        assert code == 1 and "503" in said
        ready = True
        assert (await probe(f"{base}/ready", "--tls-dir", tls))[0] == 0
        assert (await probe(f"{base}/health", "--tls-dir", tls))[0] == 0
        # what the kubelet's httpGet would do: no certificate, or no TLS at all
        code, said = await probe(f"{base}/health")
        assert code == 1 and "SSL" in said
        code, said = await probe(f"http://{base.removeprefix('https://')}/health")
        assert code == 1
    code, said = await probe(f"https://127.0.0.1:{free_port()}/ready", "--tls-dir", tls)
    assert code == 1 and "ConnectionRefused" in said


async def test_unreadable_certificates_fail_with_the_reason(pki: Pki, tmp_path: Path) -> None:
    code, said = await probe("https://127.0.0.1:1/ready", "--tls-dir", str(tmp_path / "none"))
    assert code == 1 and "TLS material" in said
