"""A real pump (etcd, storage, gRPC and HTTP on loopback) driven through the generated stubs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from tests.support.etcd import EtcdProcess
from tests.support.pump import pump_config, running_pump
from tests.support.stubs import commit, prewrite, pull, pump_stub, rollback, write
from tributary.coord.etcd import EtcdKv
from tributary.net import split_host_port
from tributary.registry.registry import NodeRegistry
from tributary.registry.status import NodeKind, NodeState
from tributary.wire.binlog import Binlog, BinlogType, Pos, PullBinlogReq, WriteBinlogReq
from tributary.wire.binlogext import PumpBatchStub, WriteBinlogsReq


async def test_write_then_pull_round_trip(tmp_path: Path, etcd: EtcdProcess) -> None:
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        cid = p.started.cluster_id
        async with pump_stub(p.addr) as stub:
            await write(stub, cid, prewrite(100, b"rows-100"))
            await write(stub, cid, prewrite(110, b"rows-110"))
            await write(stub, cid, commit(110, 111))
            await write(stub, cid, rollback(120))  # rollback of a txn never prewritten here
            await write(stub, cid, commit(100, 105))
            got = await pull(stub, cid, after=0, count=2)
            # Commit order, each commit carrying its prewrite's value.
            assert [(b.start_ts, b.commit_ts, b.prewrite_value) for b in got] == [
                (100, 105, b"rows-100"),
                (110, 111, b"rows-110"),
            ]
            assert all(b.tp == BinlogType.Commit for b in got)
            # Pulling after 105 skips what the drainer has seen.
            again = await pull(stub, cid, after=105, count=1)
            assert [b.commit_ts for b in again] == [111]
            # Each reply's meta names its binlog's ts (the replies are marshalled by hand).
            req = PullBinlogReq(cluster_id=cid, start_from=Pos(offset=105))
            async for resp in stub.pull_binlogs(req, timeout=30):
                assert (resp.entity.meta.start_ts, resp.entity.meta.commit_ts) == (110, 111)
                break


async def test_a_backlog_is_pulled_whole_and_in_order(tmp_path: Path, etcd: EtcdProcess) -> None:
    """The pump sends ready replies many to a DATA write; a stock client (the betterproto stub
    on grpclib) still reads each one, in order, small ones and ones bigger than a write."""
    sizes = [10, 3000, 200_000, 40, 70_000, 70_000, 1] * 20
    payloads = [prewrite(1000 + 10 * i, bytes([i % 251]) * n) for i, n in enumerate(sizes)]
    payloads += [commit(1000 + 10 * i, 1005 + 10 * i) for i in range(len(sizes))]
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        cid = p.started.cluster_id
        channel = Channel(*split_host_port(p.addr))
        try:
            resp = await PumpBatchStub(channel).write_binlogs(
                WriteBinlogsReq(cluster_id=cid, payloads=payloads)
            )
        finally:
            channel.close()
        assert resp.codes == [0] * len(payloads)
        async with pump_stub(p.addr) as stub:
            got = await pull(stub, cid, after=0, count=len(sizes))
    assert [(b.start_ts, b.commit_ts) for b in got] == [
        (1000 + 10 * i, 1005 + 10 * i) for i in range(len(sizes))
    ]
    assert [b.prewrite_value for b in got] == [bytes([i % 251]) * n for i, n in enumerate(sizes)]


async def test_fake_binlogs_pass_through_when_idle(tmp_path: Path, etcd: EtcdProcess) -> None:
    cfg = pump_config(tmp_path / "p", etcd.endpoint, gen_binlog_interval=0.2)
    async with running_pump(cfg) as p:
        async with pump_stub(p.addr) as stub:
            got = await pull(stub, p.started.cluster_id, after=0, count=2, skip_fake=False)
    assert all(b.tp == BinlogType.Rollback and b.start_ts == b.commit_ts for b in got)
    assert got[0].commit_ts < got[1].commit_ts


async def test_wrong_cluster_and_malformed_payloads_change_nothing(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        cid = p.started.cluster_id
        async with pump_stub(p.addr) as stub:
            with pytest.raises(GRPCError) as wrong:
                await write(stub, cid + 1, prewrite(100))
            assert wrong.value.status is Status.FAILED_PRECONDITION
            assert "cluster ID mismatch" in str(wrong.value.message)
            with pytest.raises(GRPCError) as bad:
                await write(stub, cid, b"\x0a\xff\xff")  # field 1 as bytes, truncated
            assert bad.value.status is Status.INVALID_ARGUMENT
            with pytest.raises(GRPCError) as backwards:
                await write(stub, cid, commit(100, 90))
            assert backwards.value.status is Status.INVALID_ARGUMENT
            # A probe (empty payload) succeeds and stores nothing.
            await stub.write_binlog(WriteBinlogReq(cluster_id=cid, payload=b""))
            # The pump still works, and nothing of the refused writes shows up.
            await write(stub, cid, prewrite(200, b"ok"))
            await write(stub, cid, commit(200, 201))
            got = await pull(stub, cid, after=0, count=1)
            assert [(b.start_ts, b.commit_ts) for b in got] == [(200, 201)]


async def test_batched_write_reports_each_payload(tmp_path: Path, etcd: EtcdProcess) -> None:
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        cid = p.started.cluster_id
        host, _, port = p.addr.rpartition(":")
        from grpclib.client import Channel

        channel = Channel(host, int(port))
        try:
            resp = await PumpBatchStub(channel).write_binlogs(
                WriteBinlogsReq(
                    cluster_id=cid,
                    payloads=[prewrite(300, b"a"), b"\x0a\xff", prewrite(310, b"b"), b""],
                )
            )
        finally:
            channel.close()
        assert resp.codes == [0, Status.INVALID_ARGUMENT.value, 0, 0]
        assert resp.errmsgs[0] == "" and "malformed" in resp.errmsgs[1]
        async with pump_stub(p.addr) as stub:
            await write(stub, cid, commit(300, 301))
            await write(stub, cid, commit(310, 311))
            got = await pull(stub, cid, after=0, count=2)
        assert [(b.commit_ts, b.prewrite_value) for b in got] == [(301, b"a"), (311, b"b")]


async def test_http_ops_api(tmp_path: Path, etcd: EtcdProcess) -> None:
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        cid = p.started.cluster_id
        async with pump_stub(p.addr) as stub:
            await write(stub, cid, prewrite(400, b"v", key=b"pk"))
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{p.http}/status") as r:
                doc = await r.json()
                assert r.status == 200
                me = doc["status"][p.started.node_id]
                assert me["state"] == "online" and me["host"] == p.started.advertise_addr
                assert doc["CommitTS"] > 0
            async with http.get(f"{p.http}/debug/binlog/400") as r:
                doc = await r.json()
                assert doc["binlog"]["tp"] == "Prewrite" and doc["binlog"]["prewrite_key"] == "pk"
            async with http.get(f"{p.http}/debug/binlog/999") as r:
                assert r.status == 404
            async with http.get(f"{p.http}/drainers") as r:
                assert await r.json() == []
            async with http.post(f"{p.http}/debug/gc/trigger") as r:
                assert r.status == 200
            async with http.get(f"{p.http}/metrics") as r:
                text = await r.text()
                assert "binlog_pump_storage_max_commit_ts" in text
                assert "binlog_pump_binlogs_written 1.0" in text
            async with http.put(f"{p.http}/state/someone-else/pause") as r:
                assert r.status == 404
            async with http.put(f"{p.http}/state/{p.started.node_id}/explode") as r:
                assert r.status == 400
            async with http.get(f"{p.http}/ready") as r:
                assert r.status == 200


async def test_pause_stops_the_pump_and_records_paused(tmp_path: Path, etcd: EtcdProcess) -> None:
    async with running_pump(pump_config(tmp_path / "p", etcd.endpoint)) as p:
        async with aiohttp.ClientSession() as http:
            async with http.put(f"{p.http}/state/{p.started.node_id}/pause") as r:
                assert r.status == 200
        assert await asyncio.wait_for(p.task, 30) is NodeState.PAUSED
        async with EtcdKv.connect([etcd.endpoint]) as kv:
            status = await NodeRegistry(kv).get(NodeKind.PUMP, p.started.node_id)
        assert status is not None and status.state is NodeState.PAUSED


async def test_restart_keeps_node_id_and_data(tmp_path: Path, etcd: EtcdProcess) -> None:
    cfg = pump_config(tmp_path / "p", etcd.endpoint)
    async with running_pump(cfg) as p:
        cid, node_id = p.started.cluster_id, p.started.node_id
        async with pump_stub(p.addr) as stub:
            await write(stub, cid, prewrite(500, b"kept"))
            await write(stub, cid, commit(500, 501))
    async with running_pump(cfg) as p2:
        assert p2.started.node_id == node_id and p2.started.cluster_id == cid
        async with pump_stub(p2.addr) as stub:
            got = await pull(stub, cid, after=0, count=1)
        assert [(b.commit_ts, b.prewrite_value) for b in got] == [(501, b"kept")]


async def test_second_process_on_same_data_dir_is_refused(
    tmp_path: Path, etcd: EtcdProcess
) -> None:
    from tributary.servicekit.node import DataDirBusy

    cfg = pump_config(tmp_path / "p", etcd.endpoint)
    async with running_pump(cfg):
        with pytest.raises(DataDirBusy):
            async with running_pump(cfg):
                pass


def _binlog(payload: bytes) -> Binlog:
    return Binlog().parse(payload)


async def test_pumps_with_mutual_tls_share_the_tso(tmp_path: Path, etcd: EtcdProcess) -> None:
    """Two pumps with mutual TLS: each takes timestamps for its fake binlogs from the
    TSO leader (one of them) over TLS, and a drainer-like client pulls over TLS (relayed by a
    front to the storage writer when fronts serve the port); a CN outside cert-allowed-cn is
    refused."""

    from tests.support.certs import make_pki
    from tributary.telemetry.tls import client_context
    from tributary.wire.binlog import PumpStub

    pki = make_pki(tmp_path / "pki", clients=("drainer", "intruder"))
    security = pki.server_security(allowed_cn=("pump", "drainer"))
    cfgs = [
        pump_config(tmp_path / f"p{i}", etcd.endpoint, security=security, gen_binlog_interval=0.2)
        for i in range(2)
    ]
    ssl = client_context(pki.client_security("drainer"), check_hostname=False)
    async with running_pump(cfgs[0]) as first, running_pump(cfgs[1]) as second:
        for p in (first, second):
            channel = Channel("127.0.0.1", p.started.grpc_port, ssl=ssl)
            try:
                req = PullBinlogReq(cluster_id=p.started.cluster_id)
                async for resp in PumpStub(channel).pull_binlogs(req, timeout=30):
                    fake = Binlog().parse(resp.entity.payload)
                    assert fake.tp == BinlogType.Rollback and fake.start_ts == fake.commit_ts
                    break
            finally:
                channel.close()
        intruder = client_context(pki.client_security("intruder"), check_hostname=False)
        channel = Channel("127.0.0.1", first.started.grpc_port, ssl=intruder)
        try:
            req = PullBinlogReq(cluster_id=first.started.cluster_id)
            with pytest.raises(GRPCError) as refused:
                async for _ in PumpStub(channel).pull_binlogs(req, timeout=30):
                    pass
            assert refused.value.status is Status.UNAUTHENTICATED
        finally:
            channel.close()
