"""grpclib over mutual TLS with cert-allowed-cn: the binlog.Pump service on a loopback socket."""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.server import Server

from tests.support.certs import Pki, make_pki
from tributary.telemetry.grpcauth import enforce_allowed_cn
from tributary.telemetry.tls import client_context, server_context
from tributary.wire.binlog import PumpBase, PumpStub, WriteBinlogReq, WriteBinlogResp


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class CountingPump(PumpBase):
    def __init__(self) -> None:
        self.cluster_ids: list[int] = []

    async def write_binlog(self, write_binlog_req: WriteBinlogReq) -> WriteBinlogResp:
        self.cluster_ids.append(write_binlog_req.cluster_id)
        return WriteBinlogResp(errmsg="")


@asynccontextmanager
async def pump_server(pki: Pki, pump: CountingPump, allowed: tuple[str, ...]) -> AsyncIterator[int]:
    security = pki.server_security(allowed)
    server = Server([pump])
    enforce_allowed_cn(server, security.cert_allowed_cn)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    await server.start(sock=sock, ssl=server_context(security))
    try:
        yield sock.getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def write(port: int, ctx: ssl.SSLContext | None, cluster_id: int) -> WriteBinlogResp:
    channel = Channel("127.0.0.1", port, ssl=ctx)
    try:
        return await PumpStub(channel).write_binlog(
            WriteBinlogReq(cluster_id=cluster_id), timeout=30
        )
    finally:
        channel.close()


def client(pki: Pki, name: str | None) -> ssl.SSLContext:
    ctx = client_context(pki.client_security(name))
    assert ctx is not None
    return ctx


async def test_allowed_cn_succeeds_and_other_cn_is_unauthenticated(pki: Pki) -> None:
    pump = CountingPump()
    async with pump_server(pki, pump, ("drainer",)) as port:
        assert await write(port, client(pki, "drainer"), 7) == WriteBinlogResp(errmsg="")
        with pytest.raises(GRPCError) as err:
            await write(port, client(pki, "intruder"), 8)
        assert err.value.status is Status.UNAUTHENTICATED
        assert err.value.message == "client certificate CN not allowed (intruder)"
    assert pump.cluster_ids == [7]  # the refused call never reached the handler


async def test_no_allow_list_accepts_any_client_of_the_ca(pki: Pki) -> None:
    pump = CountingPump()
    async with pump_server(pki, pump, ()) as port:
        await write(port, client(pki, "intruder"), 9)
    assert pump.cluster_ids == [9]


@pytest.mark.parametrize("name", [None, "foreign"])
async def test_handshake_refuses_missing_or_foreign_client_certs(
    pki: Pki, name: str | None
) -> None:
    pump = CountingPump()
    async with pump_server(pki, pump, ("drainer",)) as port:
        with pytest.raises((ConnectionError, StreamTerminatedError, ssl.SSLError)):
            await write(port, client(pki, name), 10)
    assert pump.cluster_ids == []


async def test_plaintext_client_gets_nothing(pki: Pki) -> None:
    pump = CountingPump()
    async with pump_server(pki, pump, ()) as port:
        with pytest.raises((ConnectionError, StreamTerminatedError)):
            await write(port, None, 11)
    assert pump.cluster_ids == []
