"""Certificates rotated under running servers and clients: the files change, the processes do
not restart, and every new handshake uses the new files (``telemetry.tlsreload``).

The files live in directories updated as the kubelet updates a Secret volume (a ``..data``
symlink swapped at once), through the three steps of a rotation to a new CA: trust both CAs,
present the new certificates, trust the new CA only. Checked over real TLS on loopback: a
grpclib server and our client contexts (made once, before the rotation) at each step, and who
is refused at the end (a client trusting the old CA, a client presenting the old CA's
certificate); an update whose certificate and key do not match leaves the server on what it had;
and a real pump and drainer, written to through the pump client for the whole rotation, deliver
every transaction once, with no failed write (and the writers' context, made before the
rotation, connects again afterwards with the new files).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import aiohttp
import pytest
import uvloop
from grpclib.client import Channel
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.server import Server

from tests.support.drainer import (
    FAST_PUMP,
    VERSION,
    InOrderSink,
    create_merge_table,
    drainer_config,
    row_value,
    running_drainer,
)
from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.tls_rotation import Rotation, SecretVolume, make_rotation
from tests.support.waits import eventually
from tributary.coord.etcd import EtcdKv
from tributary.pumpclient import PumpsClient
from tributary.settings.security import SecuritySettings
from tributary.telemetry.tls import ALPN_HTTP, client_context, server_context
from tributary.telemetry.tlsreload import ReloadingContext
from tributary.tso.client import TsoClient
from tributary.wire.binlog import (
    PullBinlogReq,
    PullBinlogResp,
    PumpBase,
    PumpStub,
    WriteBinlogReq,
    WriteBinlogResp,
)

REFUSED = (ConnectionError, StreamTerminatedError, ssl.SSLError, GRPCError, TimeoutError)


@pytest.fixture(scope="module")
def rotation(tmp_path_factory: pytest.TempPathFactory) -> Rotation:
    return make_rotation(tmp_path_factory.mktemp("rotation"))


class AnswerPump(PumpBase):
    async def write_binlog(self, write_binlog_req: WriteBinlogReq) -> WriteBinlogResp:
        return WriteBinlogResp(errmsg="")

    async def pull_binlogs(self, pull_binlog_req: PullBinlogReq) -> AsyncIterator[PullBinlogResp]:
        yield PullBinlogResp()


@asynccontextmanager
async def grpc_server(security: SecuritySettings) -> AsyncIterator[int]:
    server = Server([AnswerPump()])
    await server.start("127.0.0.1", 0, ssl=server_context(security))
    try:
        yield server._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        server.close()
        await server.wait_closed()


async def call(port: int, ctx: ssl.SSLContext, channel: Channel | None = None) -> bool:
    """One WriteBinlog on a new connection (or on ``channel``): True if answered."""
    own = channel is None
    channel = channel or Channel("127.0.0.1", port, ssl=ctx)
    try:
        await PumpStub(channel).write_binlog(WriteBinlogReq(cluster_id=1), timeout=10)
        return True
    except REFUSED:
        return False
    finally:
        if own:
            channel.close()


async def pull_one(port: int, ctx: ssl.SSLContext, cluster_id: int) -> bool:
    """True if a real pump's PullBinlogs stream yields a binlog (its fake ones come every
    0.2 s) over a new connection."""
    channel = Channel("127.0.0.1", port, ssl=ctx)
    try:
        req = PullBinlogReq(cluster_id=cluster_id)
        async for _ in PumpStub(channel).pull_binlogs(req, timeout=10):
            return True
        return False
    except REFUSED:
        return False
    finally:
        channel.close()


def plain(security: SecuritySettings) -> ssl.SSLContext:
    """A client of fixed files (no rotation), as a peer that was not given the new ones."""
    ctx = client_context(security, check_hostname=False)
    assert ctx is not None
    return ctx


async def test_a_grpc_server_and_its_clients_follow_a_rotation_to_a_new_ca(
    rotation: Rotation, tmp_path: Path
) -> None:
    server_files = SecretVolume(tmp_path / "server", rotation.files("old", "old"))
    client_files = SecretVolume(tmp_path / "client", rotation.files("old", "old"))
    ours = client_context(client_files.security(), check_hostname=False)  # made once
    assert isinstance(ours, ReloadingContext)
    old_only, new_only = rotation.security("old", "old"), rotation.security("new", "new")
    old_ca_new_leaf = rotation.security("old", "new")
    new_ca_old_leaf = rotation.security("new", "old")
    async with grpc_server(server_files.security()) as port:
        early = Channel("127.0.0.1", port, ssl=ours)  # connected before the rotation
        try:
            assert await call(port, ours, early)
            assert await call(port, plain(old_only))
            assert not await call(port, plain(new_only))

            # 1: both CAs trusted, the old certificates still presented
            for volume in (server_files, client_files):
                volume.update(rotation.files("both", "old"))
            assert await call(port, ours)
            assert await call(port, plain(old_only))
            assert await call(port, plain(old_ca_new_leaf))  # a new client cert is accepted

            # 2: the new certificates presented, both CAs still trusted
            for volume in (server_files, client_files):
                volume.update(rotation.files("both", "new"))
            assert await call(port, ours)
            assert await call(port, plain(new_only))
            assert await call(port, plain(new_ca_old_leaf))  # a peer not yet updated
            assert not await call(port, plain(old_only))  # the server's cert: the new CA's

            # 3: the new CA only
            for volume in (server_files, client_files):
                volume.update(rotation.files("new", "new"))
            assert await call(port, ours)
            assert await call(port, plain(new_only))
            assert not await call(port, plain(old_only))
            assert not await call(port, plain(new_ca_old_leaf))  # the old CA's client cert
            assert await call(port, ours, early)  # an established connection keeps its session
        finally:
            early.close()
    assert ours.generation == 3


async def test_files_that_do_not_load_leave_the_previous_ones_in_use(
    rotation: Rotation, tmp_path: Path
) -> None:
    files = SecretVolume(tmp_path / "server", rotation.files("old", "old"))
    old_only, new_only = (
        plain(rotation.security("old", "old")),
        plain(rotation.security("new", "new")),
    )
    ctx = server_context(files.security())
    assert isinstance(ctx, ReloadingContext)
    async with grpc_server(files.security()) as port:
        mismatched = rotation.files("new", "new")
        mismatched["tls.key"] = rotation.files("old", "old")["tls.key"]
        files.update(mismatched)
        assert await call(port, old_only)  # still the old certificate, the old CA
        assert not await call(port, new_only)
        files.update(rotation.files("new", "new"))  # the next update is tried again
        assert await call(port, new_only)
        assert not await call(port, old_only)


async def test_pump_and_drainer_deliver_every_write_through_a_rotation(
    rotation: Rotation, tmp_path: Path, etcd: EtcdProcess
) -> None:
    """A real pump and drainer (gRPC and the HTTP API over mutual TLS on the pump's one port)
    and writers using the pump client, each with its own files, rotated step by step while the
    writers commit: no write fails, the drainer delivers each transaction once, and afterwards
    the pump refuses a client of the old CA on both protocols."""
    start = rotation.files("old", "old")
    volumes = {name: SecretVolume(tmp_path / name, start) for name in ("pump", "drainer", "writer")}
    sink = InOrderSink()
    pump_cfg = pump_config(
        tmp_path / "p", etcd.endpoint, security=volumes["pump"].security(), **FAST_PUMP
    )
    drainer_cfg = drainer_config(
        tmp_path / "d", etcd.endpoint, security=volumes["drainer"].security()
    )
    writer_tls = client_context(volumes["writer"].security(), check_hostname=False)
    async with (
        EtcdKv.connect([etcd.endpoint]) as kv,
        running_pump(pump_cfg) as pump,
        running_drainer(drainer_cfg, sink),
    ):
        cluster_id = pump.started.cluster_id
        assert await create_merge_table(kv) == VERSION
        async with (
            TsoClient(kv, cluster_id, ssl_context=writer_tls) as tso,
            PumpsClient(kv, cluster_id, ssl_context=writer_tls) as client,
        ):
            await eventually(lambda: len(client.pumps.available) == 1)
            txns: dict[int, int] = {}
            stop = asyncio.Event()

            async def writer(w: int) -> None:
                i = 0
                while not stop.is_set():
                    begin = await tso.get_ts()
                    await client.prewrite(begin, row_value(VERSION, begin), b"w%d-%d" % (w, i))
                    commit = await tso.get_ts()
                    await client.commit(begin, commit)
                    txns[commit] = begin
                    i += 1
                    await asyncio.sleep(0.02)

            def wrote_more(before: int) -> bool:
                return len(txns) >= before + 20

            async with asyncio.TaskGroup() as tg:
                for w in range(3):
                    tg.create_task(writer(w), name=f"test-writer-{w}")
                for ca, leaf in Rotation.STEPS[1:]:
                    before = len(txns)
                    for volume in volumes.values():
                        volume.update(rotation.files(ca, leaf))
                    await eventually(partial(wrote_more, before), within=30)
                stop.set()
            stats = client.stats
            assert (stats.rpc_errors, stats.prewrites_failed, stats.commits_failed) == (0, 0, 0)
        # new connections of the writers' context, made before the rotation: the new files
        async with (
            TsoClient(kv, cluster_id, ssl_context=writer_tls) as tso,
            PumpsClient(kv, cluster_id, ssl_context=writer_tls) as client,
        ):
            await eventually(lambda: len(client.pumps.available) == 1)
            for i in range(5):
                begin = await tso.get_ts()
                await client.prewrite(begin, row_value(VERSION, begin), b"after-%d" % i)
                commit = await tso.get_ts()
                await client.commit(begin, commit)
                txns[commit] = begin
            assert client.stats.rpc_errors == 0
        await eventually(lambda: txns.keys() <= sink.commit_ts(), within=45)
        assert [t.commit_ts for t in sink.txns] == sorted(txns)

        old, new_files = rotation.security("old", "old"), rotation.security("new", "new")
        assert not await pull_one(pump.started.grpc_port, plain(old), cluster_id)
        assert await pull_one(pump.started.grpc_port, plain(new_files), cluster_id)
        url = f"https://127.0.0.1:{pump.started.http_port}/status"
        http_old = client_context(old, alpn=ALPN_HTTP, check_hostname=False) or False
        http_new = client_context(new_files, alpn=ALPN_HTTP, check_hostname=False) or False
        async with aiohttp.ClientSession() as session:
            async with session.get(url, ssl=http_new) as r:
                assert r.status == 200
            with pytest.raises(aiohttp.ClientError):
                async with session.get(url, ssl=http_old) as r:
                    await r.read()


def test_under_uvloop_as_the_services_run(rotation: Rotation, tmp_path: Path) -> None:
    """The services' event loop (uvloop) hands each handshake to the newest files too."""
    files = SecretVolume(tmp_path / "server", rotation.files("old", "old"))
    old_only, new_only = rotation.security("old", "old"), rotation.security("new", "new")

    async def scenario() -> list[bool]:
        async with grpc_server(files.security()) as port:
            seen = [await call(port, plain(old_only)), await call(port, plain(new_only))]
            files.update(rotation.files("new", "new"))
            return [*seen, await call(port, plain(old_only)), await call(port, plain(new_only))]

    assert uvloop.run(scenario()) == [True, False, False, True]
