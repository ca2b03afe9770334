"""grpclib over mutual TLS with cert-allowed-cn: the binlog.Pump service on a loopback socket,
written to by a client and pulled by the drainer's puller."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.server import Server

from services.drainer.feed import Inbox
from services.drainer.puller import Puller
from tests.support.certs import Pki, make_pki
from tests.support.k8s import eventually_async
from tributary.telemetry.grpcauth import enforce_allowed_cn
from tributary.telemetry.tls import client_context, server_context
from tributary.wire.binlog import (
    Binlog,
    BinlogType,
    Entity,
    PullBinlogReq,
    PullBinlogResp,
    PumpBase,
    PumpStub,
    WriteBinlogReq,
    WriteBinlogResp,
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class CountingPump(PumpBase):
    def __init__(self) -> None:
        self.cluster_ids: list[int] = []

    async def write_binlog(self, write_binlog_req: WriteBinlogReq) -> WriteBinlogResp:
        self.cluster_ids.append(write_binlog_req.cluster_id)
        return WriteBinlogResp(errmsg="")

    async def pull_binlogs(self, pull_binlog_req: PullBinlogReq) -> AsyncIterator[PullBinlogResp]:
        self.cluster_ids.append(pull_binlog_req.cluster_id)
        for ts in (20, 30):
            b = Binlog(tp=BinlogType(BinlogType.Commit), start_ts=ts - 1, commit_ts=ts)
            yield PullBinlogResp(entity=Entity(payload=bytes(b)))
        await asyncio.Event().wait()  # the stream stays open, as a pump's does


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


async def test_the_drainer_pulls_over_tls_only_with_an_allowed_cert(pki: Pki) -> None:
    pump = CountingPump()
    async with pump_server(pki, pump, ("drainer",)) as port:
        addr = f"127.0.0.1:{port}"
        pulled, refused = Inbox(asyncio.Event()), Inbox(asyncio.Event())
        good = Puller("pump-1", addr, 12, 0, pulled, ssl_context=client(pki, "drainer"))
        bad = Puller(
            "pump-1", addr, 13, 0, refused, ssl_context=client(pki, "intruder"), retry_interval=0.05
        )
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(p.run(), name=f"test-puller-{p.last_ts}") for p in (good, bad)]
            await eventually_async(lambda: good.received >= 2, "two binlogs pulled", 30, 0.02)
            await eventually_async(lambda: bad.reconnects >= 2, "refused pulls retried", 30, 0.02)
            for t in tasks:
                t.cancel()
    assert [pulled.take().commit_ts for _ in range(2)] == [20, 30]  # type: ignore[union-attr]
    assert bad.received == 0 and refused.qsize() == 0
    assert pump.cluster_ids == [12]  # the refused calls never reached the handler
