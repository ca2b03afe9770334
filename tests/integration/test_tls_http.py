"""The ops HTTP server over mutual TLS: client certificates, the CA and cert-allowed-cn.

Also the real pump's and drainer's state changes (``PUT /state/{id}/pause``) with TLS on:
refused without a client certificate, with another CA's or with a CN outside cert-allowed-cn,
and the node keeps running; the allowed client pauses it."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.support.certs import Pki, make_pki
from tests.support.drainer import InOrderSink, drainer_config, running_drainer
from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tributary.registry.status import NodeState
from tributary.telemetry.http import OpsServer, json_response
from tributary.telemetry.tls import ALPN_HTTP, client_context, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class Calls:
    def __init__(self) -> None:
        self.count = 0

    async def status(self, request: web.Request) -> web.Response:
        self.count += 1
        return json_response({"ok": True})


async def get(url: str, ctx: ssl.SSLContext) -> tuple[int, object]:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=ctx) as r:
        return r.status, await r.json()


def client(pki: Pki, name: str | None) -> ssl.SSLContext:
    ctx = client_context(pki.client_security(name), alpn=ALPN_HTTP)
    assert ctx is not None
    return ctx


def serve(pki: Pki, calls: Calls, allowed: tuple[str, ...] = ()) -> OpsServer:
    security = pki.server_security(allowed)
    ctx = server_context(security, alpn=ALPN_HTTP)
    routes = [web.get("/status", calls.status)]
    return OpsServer("127.0.0.1", 0, routes, ssl_context=ctx, allowed_cns=security.cert_allowed_cn)


async def test_allowed_client_is_served_and_others_get_403(pki: Pki) -> None:
    calls = Calls()
    async with serve(pki, calls, ("drainer",)) as server:
        assert server.url.startswith("https://127.0.0.1:")
        assert await get(f"{server.url}/status", client(pki, "drainer")) == (200, {"ok": True})
        assert calls.count == 1
        status, body = await get(f"{server.url}/status", client(pki, "intruder"))
        assert status == 403
        assert body == {"error": "client certificate CN not allowed (intruder)", "status": 403}
        status, _ = await get(f"{server.url}/health", client(pki, "intruder"))
        assert status == 403  # the built-in endpoints are guarded too
    assert calls.count == 1  # the refused request never reached the handler


async def test_without_allow_list_any_cert_from_the_ca_is_served(pki: Pki) -> None:
    calls = Calls()
    async with serve(pki, calls) as server:
        assert await get(f"{server.url}/status", client(pki, "intruder")) == (200, {"ok": True})


@pytest.mark.parametrize("name", [None, "foreign"])
async def test_handshake_refuses_missing_or_foreign_client_certs(
    pki: Pki, name: str | None
) -> None:
    calls = Calls()
    async with serve(pki, calls) as server:
        with pytest.raises(aiohttp.ClientError):
            await get(f"{server.url}/status", client(pki, name))
    assert calls.count == 0


async def test_client_verifies_the_server(pki: Pki, tmp_path: Path) -> None:
    calls = Calls()
    stranger = make_pki(tmp_path)  # a client that trusts a different CA
    async with serve(pki, calls) as server:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await get(f"{server.url}/status", client(stranger, "drainer"))
    assert calls.count == 0


async def put(url: str, ctx: ssl.SSLContext) -> int:
    async with aiohttp.ClientSession() as session, session.put(url, ssl=ctx) as r:
        return r.status


def _pump(tmp: Path, etcd: str, pki: Pki) -> AbstractAsyncContextManager[Any]:
    security = pki.server_security(allowed_cn=("drainer",))
    return running_pump(pump_config(tmp / "p", etcd, security=security))


def _drainer(tmp: Path, etcd: str, pki: Pki) -> AbstractAsyncContextManager[Any]:
    security = pki.server_security(allowed_cn=("drainer",))
    cfg = drainer_config(tmp / "d", etcd, initial_commit_ts=7, security=security)
    return running_drainer(cfg, InOrderSink())


@pytest.mark.parametrize("node", [_pump, _drainer], ids=["pump", "drainer"])
async def test_state_changes_need_an_allowed_client_certificate(
    pki: Pki,
    tmp_path: Path,
    etcd: EtcdProcess,
    node: Callable[[Path, str, Pki], AbstractAsyncContextManager[Any]],
) -> None:
    async with node(tmp_path, etcd.endpoint, pki) as running:
        url = f"https://127.0.0.1:{running.started.http_port}/state/{running.started.node_id}/pause"
        for name in (None, "foreign"):  # no certificate, or one from another CA: no handshake
            with pytest.raises(aiohttp.ClientError):
                await put(url, client(pki, name))
        assert await put(url, client(pki, "intruder")) == 403
        with pytest.raises(aiohttp.ClientError):
            await put(url.replace("https://", "http://"), client(pki, "drainer"))
        await asyncio.sleep(0.5)
        assert not running.task.done()  # nothing refused reached the state machine
        assert await put(url, client(pki, "drainer")) == 200
        assert await asyncio.wait_for(asyncio.shield(running.task), 60) is NodeState.PAUSED
