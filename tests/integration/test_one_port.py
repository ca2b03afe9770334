"""gRPC and the HTTP API on one port, as tidb-binlog serves them: real pump and drainer
processes answer WriteBinlog/Notify and /status, /metrics on their gRPC port, with and without
TLS; a connection that is neither gets closed and the process keeps serving."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import aiohttp
import pytest
from grpclib.client import Channel

from tests.support.certs import Pki, make_pki
from tests.support.etcd import EtcdProcess
from tests.support.net import free_port
from tests.support.stubs import commit, prewrite
from tributary.coord.cluster_id import ensure_cluster_id
from tributary.coord.etcd import EtcdKv
from tributary.telemetry.tls import ALPN_GRPC, ALPN_HTTP, client_context
from tributary.wire.binlog import CisternStub, NotifyReq, PumpStub, WriteBinlogReq

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_flags(pki: Pki | None) -> list[str]:
    if pki is None:
        return []
    s = pki.server_security()
    return [
        *("--security-ssl-ca", s.ssl_ca, "--security-ssl-cert", s.ssl_cert),
        *("--security-ssl-key", s.ssl_key),
    ]


def http_ctx(pki: Pki | None) -> ssl.SSLContext | None:
    return None if pki is None else client_context(pki.client_security("drainer"), alpn=ALPN_HTTP)


def grpc_ctx(pki: Pki | None) -> ssl.SSLContext | None:
    return None if pki is None else client_context(pki.client_security("drainer"), alpn=ALPN_GRPC)


@contextmanager
def process(service: str, log_path: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", service, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def tail(log: Path) -> str:
    return log.read_text()[-2000:]


async def get(url: str, ctx: ssl.SSLContext | None) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url, ssl=ctx if ctx else False) as r:
        return r.status, await r.text()


async def wait_ready(
    base: str, ctx: ssl.SSLContext | None, proc: subprocess.Popen[bytes], log: Path
) -> None:
    async with asyncio.timeout(60):
        while True:
            if proc.poll() is not None:
                raise AssertionError(tail(log))
            try:
                if (await get(f"{base}/ready", ctx))[0] == 200:
                    return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)


@asynccontextmanager
async def channel(port: int, pki: Pki | None) -> AsyncIterator[Channel]:
    ch = Channel("127.0.0.1", port, ssl=grpc_ctx(pki))
    try:
        yield ch
    finally:
        ch.close()


async def garbage_is_closed(port: int, first: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(first)
        await writer.drain()
        async with asyncio.timeout(10):
            rest = await reader.read()  # the server closes; nothing is answered in plain text
        assert b"HTTP/1.1" not in rest
    finally:
        writer.close()


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_pump_serves_grpc_and_http_on_one_port(
    etcd: EtcdProcess, tmp_path: Path, pki: Pki, tls: bool
) -> None:
    security = pki if tls else None
    port = free_port()
    log = tmp_path / "pump.log"
    args = ["--addr", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "p")]
    args += ["--pd-urls", etcd.endpoint, "--storage-stop-write-at-available-space", "1MiB"]
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    ctx = http_ctx(security)
    with process("services.pump", log, *args, *tls_flags(security)) as proc:
        await wait_ready(base, ctx, proc, log)
        status, body = await get(f"{base}/status", ctx)
        assert status == 200, body
        cluster_id = await cluster_id_of(etcd)
        async with channel(port, security) as ch:
            stub = PumpStub(ch)
            for payload in (prewrite(100), commit(100, 101)):
                resp = await stub.write_binlog(
                    WriteBinlogReq(cluster_id=cluster_id, payload=payload), timeout=30
                )
                assert resp.errmsg == ""
        status, text = await get(f"{base}/metrics", ctx)
        assert status == 200
        assert "binlog_pump_binlogs_written 2.0" in text
        if not tls:
            await garbage_is_closed(port, b"\x00\x01\x02garbage\r\n\r\n")
            await garbage_is_closed(port, b"NOTANHTTPMETHODATALLREALLY")
        else:
            await garbage_is_closed(port, b"GET /status HTTP/1.1\r\n\r\n")  # plain text to TLS
        assert (await get(f"{base}/status", ctx))[0] == 200  # still serving
        assert proc.poll() is None


async def cluster_id_of(etcd: EtcdProcess) -> int:
    async with EtcdKv.connect([etcd.endpoint]) as kv:
        return await ensure_cluster_id(kv)


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_drainer_serves_grpc_and_http_on_one_port(
    etcd: EtcdProcess, tmp_path: Path, pki: Pki, tls: bool
) -> None:
    security = pki if tls else None
    port = free_port()
    log = tmp_path / "drainer.log"
    args = ["--addr", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "d")]
    args += ["--pd-urls", etcd.endpoint, "--initial-commit-ts", "7"]
    args += ["--node-id", "drainer-one-port", "--syncer-sink-uri", "blackhole://"]
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    ctx = http_ctx(security)
    with process("services.drainer", log, *args, *tls_flags(security)) as proc:
        await wait_ready(base, ctx, proc, log)
        async with channel(port, security) as ch:
            await CisternStub(ch).notify(NotifyReq(), timeout=30)
        status, body = await get(f"{base}/status", ctx)
        assert status == 200 and '"LastTS": 7' in body, body
        status, text = await get(f"{base}/metrics", ctx)
        assert status == 200 and "binlog_drainer_checkpoint_tso" in text
        if not tls:
            await garbage_is_closed(port, b"\xff\xfe\x00garbage")
        assert (await get(f"{base}/status", ctx))[0] == 200
        assert proc.poll() is None
